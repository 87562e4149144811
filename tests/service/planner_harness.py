"""A planner on the in-memory bus and store, plus a stand-in for executors and health reporters.

The stand-in only answers messages (results and readiness) as the real services would; every
decision is the planner's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from rollout_common import envelope
from rollout_common.commands import StageAdvance
from rollout_common.events import Readiness, ReleaseTarget, UpgradeResult
from rollout_common.fleet import Cluster
from rollout_common.ports import Bus, Record, Store
from rollout_common.sequence import Sequence as StageSequence
from rollout_common.topics.catalog import (
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)
from rollout_planner.engine import EngineState, new_state
from rollout_planner.service.clock import Clock
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.planner import Planner
from rollout_planner.service.settings import PlannerSettings

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"


def sequence(*, soak: str = "1d") -> StageSequence:
    return StageSequence.model_validate(
        {
            "name": "svc",
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": soak},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": soak},
            ],
        }
    )


def fleet() -> list[Cluster]:
    names = [("can-1", "canary"), ("can-2", "canary"), ("prod-1", "prod"), ("prod-2", "prod")]
    return [Cluster(name=name, labels={"env": env}, version=OLD) for name, env in names]


def settings(prefix: str, **overrides: Any) -> PlannerSettings:
    values: dict[str, Any] = {
        "topic_prefix": prefix,
        "planner_group": f"{prefix}planner",
        "poll_timeout_s": 0.2,
        "http_port": 0,
        "retry_backoff_s": 0.05,
    }
    return PlannerSettings(**(values | overrides))


def make_planner(
    *, bus: Bus, store: Store, prefix: str, clock: Clock, lease: PlannerLease | None = None, **overrides: Any
) -> Planner:
    async def initial() -> EngineState:
        return new_state(sequence(), fleet())

    return Planner(
        bus=bus, store=store, settings=settings(prefix, **overrides), clock=clock, initial_state=initial, lease=lease
    )


async def publish(bus: Bus, prefix: str, topic: TopicDef, model: BaseModel, *, event_id: str) -> None:
    value, headers = envelope.encode(model, event_id=event_id, source="test", at=START)
    await bus.publish(prefix + topic.name, key=topic.key(model).encode(), value=value, headers=headers)


async def release(bus: Bus, prefix: str, event_id: str = "rel-1") -> None:
    target = ReleaseTarget(event_id=event_id, channel="regular", targets={"1.30": NEW})
    await publish(bus, prefix, RELEASE_TARGETS, target, event_id=event_id)


def decoded(records: Sequence[Any], topic: TopicDef) -> list[BaseModel]:
    """Port records or aiokafka's (whose headers are a list of pairs): dict() reads both."""
    return [envelope.decode(r.value, dict(r.headers), topic.models)[1] for r in records]


def kinds(records: list[Record]) -> list[str]:
    return [json.loads(r.value)["kind"] for r in records]


@dataclass
class FakeFleet:
    """Answers every new stage-advance record: started, succeeded, then ready (what executors and
    health reporters would say)."""

    bus: Bus
    prefix: str
    answered: set[str] = field(default_factory=set)
    upgraded: list[tuple[str, str]] = field(default_factory=list)

    async def answer(self, advances: Sequence[Any]) -> list[StageAdvance]:
        new: list[StageAdvance] = []
        for model in decoded(advances, STAGE_ADVANCE):
            assert isinstance(model, StageAdvance)
            if model.command_id in self.answered:
                continue
            self.answered.add(model.command_id)
            new.append(model)
            for cluster in model.clusters:
                self.upgraded.append((cluster, model.track.value))
                for outcome in ("started", "succeeded"):
                    result = UpgradeResult(
                        command_id=model.command_id,
                        cluster=cluster,
                        track=model.track,
                        version=model.version,
                        outcome=outcome,
                    )
                    await publish(
                        self.bus,
                        self.prefix,
                        UPGRADE_RESULTS,
                        result,
                        event_id=f"{model.command_id}:{cluster}:{outcome}",
                    )
                ready = Readiness(cluster=cluster, ready=True)
                await publish(self.bus, self.prefix, READINESS, ready, event_id=f"{model.command_id}:{cluster}:ready")
        return new


def progress_kinds(records: list[Record]) -> list[str]:
    return [m.kind for m in decoded(records, PROGRESS)]  # type: ignore[attr-defined]
