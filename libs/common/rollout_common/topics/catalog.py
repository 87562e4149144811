"""The topic catalog: names, keys and the models each topic carries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from rollout_common.check_results import CheckResult
from rollout_common.commands import (
    CheckSeries,
    CommandAck,
    Notice,
    RolloutTransition,
    StageAdvance,
    StageTransition,
    WaitChanged,
)
from rollout_common.events import (
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    SequenceChange,
    StartRollout,
    UpgradeResult,
)
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import TopicSpec

WEEK_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class TopicDef:
    name: str
    models: tuple[type[BaseModel], ...]
    key: Callable[[Any], str]
    partitions: int = 1
    compacted: bool = False
    retention_ms: int | None = WEEK_MS
    doc: str = ""

    def spec(self, prefix: str = "", *, partitions: int | None = None) -> TopicSpec:
        """The topic to create; `partitions` None: the catalog's default (settings may override it)."""
        return TopicSpec(
            name=prefix + self.name,
            partitions=self.partitions if partitions is None else partitions,
            compacted=self.compacted,
            retention_ms=None if self.compacted else self.retention_ms,
        )


RELEASE_TARGETS = TopicDef(
    "rollout.release-targets",
    (ReleaseTarget, StartRollout),
    key=lambda m: getattr(m, "channel", "on-demand"),
    doc="Release targets published by platform teams, and on-demand rollout starts (START-1, START-2).",
)
OPERATOR_COMMANDS = TopicDef(
    "rollout.operator-commands",
    (OperatorCommand, SequenceChange),
    key=lambda m: "sequence" if isinstance(m, SequenceChange) else (m.rollout_id or "all"),
    doc="Pause, resume, cancel, retry, soak overrides (OPS-1..5) and sequence changes (SEQ-7).",
)
STAGE_ADVANCE = TopicDef(
    "rollout.stage-advance",
    (StageAdvance,),
    key=lambda m: m.command_id,
    partitions=16,
    doc="Planner to executors: one batch of at most maxNew clusters per message, keyed by command id so "
    "batches spread over the executor group (BUS-5).",
)
UPGRADE_RESULTS = TopicDef(
    "rollout.upgrade-results",
    (UpgradeResult,),
    key=lambda m: m.cluster,
    partitions=4,
    doc="Executors to planner: started / succeeded / failed per cluster and track.",
)
HEARTBEATS = TopicDef(
    "rollout.cluster-heartbeats",
    (Heartbeat,),
    key=lambda m: m.cluster,
    partitions=4,
    doc="Health reporters' raw probes, on change and as heartbeats; the health service reads them.",
)
READINESS = TopicDef(
    "rollout.cluster-readiness",
    (Readiness,),
    key=lambda m: m.cluster,
    partitions=4,
    doc="The health service's readiness changes per cluster (stale heartbeats become not ready).",
)
INVENTORY = TopicDef(
    "rollout.inventory",
    (InventoryChange,),
    # a group's key cannot be a cluster's: '/' is not allowed in cluster names
    key=lambda m: m.cluster.name if m.cluster else (f"group/{m.cluster_group.name}" if m.cluster_group else m.name),
    compacted=True,
    doc="Cluster and cluster group registrations, relabels and removals, compacted by cluster or group (SEQ-6).",
)
CHECK_RESULTS = TopicDef(
    "rollout.check-results",
    (CheckResult,),
    # One rollout's results stay in order on one partition, as the planner applies them per rollout.
    key=lambda m: m.rollout_id,
    partitions=4,
    doc="The health service's metric check evaluations: passed, failed or inconclusive, with the value (CHK-2).",
)
PROGRESS = TopicDef(
    "rollout.progress",
    (StageTransition, RolloutTransition, CommandAck, WaitChanged, Notice, StageAdvance, CheckSeries),
    key=lambda m: getattr(m, "rollout_id", None) or "fleet",
    doc="Everything the planner decides and why it waits, for anyone to subscribe to (STAT-5).",
)
DEAD_LETTER = TopicDef(
    "rollout.dead-letter",
    (),
    key=lambda m: "dlq",
    retention_ms=4 * WEEK_MS,
    doc="Messages that could not be parsed or validated, with the reason in headers (BUS-4).",
)

ALL = (
    RELEASE_TARGETS,
    OPERATOR_COMMANDS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    HEARTBEATS,
    READINESS,
    CHECK_RESULTS,
    INVENTORY,
    PROGRESS,
    DEAD_LETTER,
)


def by_name(name: str) -> TopicDef:
    for topic in ALL:
        if topic.name == name:
            return topic
    raise KeyError(name)
