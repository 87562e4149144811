"""Faults on the input topics: inventory changes during the rollout (SEQ-6, SEQ-6a) and bad records
(BUS-4), as an operator or a broken producer would send them.

- `relabel`: a cluster gets a new label and stays in its stage;
- `move`: a cluster of dev or staging is relabelled into the next stage downstream (one that has
  not run yet, so the cluster is upgraded there or counts as done there);
- `remove`: a cluster leaves the inventory;
- `bad_records`: a value that is not JSON and one of the wrong schema on every input topic of the
  planner, the executors and the health monitor, with valid CloudEvents headers so they get past
  the envelope and fail at the body.

The inventory kinds pick their cluster when they fire: one upgrading right then when the fault
says `in_flight` (SEQ-6a) and one is, otherwise one not handed out yet.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from rollout_common import envelope
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster
from rollout_common.topics.catalog import (
    HEARTBEATS,
    INVENTORY,
    OPERATOR_COMMANDS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
    TopicDef,
)

INPUT_KINDS = ("relabel", "move", "remove", "bad_records")
INVENTORY_KINDS = ("relabel", "move", "remove")
BAD_SOURCE = "chaos-bad-records"
SOURCE = "chaos-test"

# per input topic, a body of the wrong schema: each fails validation at its consumer
_WRONG_SCHEMA: dict[str, dict[str, object]] = {
    RELEASE_TARGETS.name: {"eventId": 42, "channel": "regular"},
    OPERATOR_COMMANDS.name: {"kind": "operator_command", "commandId": "chaos-bad", "action": "explode"},
    UPGRADE_RESULTS.name: {
        "kind": "upgrade_result",
        "commandId": "chaos-bad",
        "cluster": "dev-001",
        "track": "controlPlane",
        "version": "1.31.13-gke.1023000",
        "outcome": "exploded",
    },
    READINESS.name: {"kind": "readiness", "cluster": "dev-001", "ready": "maybe"},
    INVENTORY.name: {"kind": "inventory", "action": "upsert", "cluster": {"name": "chaos-bad"}},
    STAGE_ADVANCE.name: {"kind": "stage_advance", "commandId": "chaos-bad", "clusters": "dev-001"},
    HEARTBEATS.name: {"kind": "heartbeat", "cluster": 42, "ready": True},
}
BAD_TOPICS: tuple[TopicDef, ...] = (
    RELEASE_TARGETS,
    OPERATOR_COMMANDS,
    UPGRADE_RESULTS,
    READINESS,
    INVENTORY,
    STAGE_ADVANCE,
    HEARTBEATS,
)


@dataclass(frozen=True, slots=True)
class Outgoing:
    topic: TopicDef
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


def bad_records(seed: int, serial: int) -> list[Outgoing]:
    """Two records per input topic: a value cut off mid-JSON, and a body of the wrong schema."""
    out = []
    for topic in BAD_TOPICS:
        for variant, value in (
            ("not-json", b'{"kind": "cut off mid-record", "cluster": '),
            ("wrong-schema", json.dumps(_WRONG_SCHEMA[topic.name]).encode()),
        ):
            event_id = f"chaos-bad-{seed}-{serial}-{topic.name}-{variant}"
            headers = [
                ("ce_specversion", b"1.0"),
                ("ce_id", event_id.encode()),
                ("ce_source", BAD_SOURCE.encode()),
                # the topic's own type, so the record fails at its body and not at the envelope
                ("ce_type", f"{envelope.TYPE_PREFIX}{topic.models[0].model_fields['kind'].default}.v1".encode()),
                ("content-type", b"application/json"),
            ]
            out.append(Outgoing(topic, b"chaos-bad", value, headers))
    return out


@dataclass
class InjectedFleet:
    """The inventory as this test has set it: where each cluster is, and what it looks like."""

    stages: tuple[str, ...]
    version: str
    stage_of: dict[str, str]
    labels: dict[str, dict[str, str]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    def spec(self, name: str) -> Cluster:
        labels = {"env": self.stage_of[name]} | self.labels.get(name, {})
        return Cluster(name=name, labels=labels, version=self.version)

    def downstream(self, stage: str) -> str | None:
        index = self.stages.index(stage)
        return self.stages[index + 1] if index + 1 < len(self.stages) else None


@dataclass(frozen=True, slots=True)
class Picked:
    cluster: str
    in_flight: bool
    change: InventoryChange
    detail: str


def pick(
    kind: str,
    *,
    fleet: InjectedFleet,
    in_flight_wanted: bool,
    upgrading: Collection[str],
    handed_out: Collection[str],
    rng: random.Random,
) -> Picked | None:
    """Choose the cluster for an inventory fault and apply the change to the test's fleet."""
    present = sorted(fleet.stage_of)
    movable = [c for c in present if fleet.downstream(fleet.stage_of[c]) is not None]
    candidates = movable if kind == "move" else present
    busy = [c for c in candidates if c in upgrading]
    idle = [c for c in candidates if c not in handed_out]
    pool = (busy if in_flight_wanted and busy else idle) or candidates
    if not pool:
        return None
    name = rng.choice(pool)
    in_flight = name in upgrading
    if kind == "remove":
        del fleet.stage_of[name]
        fleet.removed.add(name)
        change = InventoryChange(action="remove", name=name)
        detail = f"{name} removed"
    elif kind == "move":
        before = fleet.stage_of[name]
        after = fleet.downstream(before)
        assert after is not None
        fleet.stage_of[name] = after
        change = InventoryChange(action="upsert", cluster=fleet.spec(name))
        detail = f"{name} moved from {before} to {after}"
    else:
        fleet.labels.setdefault(name, {})["chaos-relabel"] = str(len(fleet.labels) + 1)
        change = InventoryChange(action="upsert", cluster=fleet.spec(name))
        detail = f"{name} relabelled in {fleet.stage_of[name]}"
    return Picked(name, in_flight, change, detail + (" while upgrading" if in_flight else ""))


def inventory_record(change: InventoryChange, *, event_id: str) -> Outgoing:
    value, headers = envelope.encode(change, event_id=event_id, source=SOURCE, at=time.time())
    return Outgoing(INVENTORY, INVENTORY.key(change).encode(), value, list(headers.items()))
