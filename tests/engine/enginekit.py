"""Helpers to drive the pure engine with explicit events and read the exact commands it emits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rollout_common.commands import (
    Command,
    CommandAck,
    Notice,
    StageAdvance,
    StageTransition,
    WaitChanged,
)
from rollout_common.events import (
    Event,
    EventBatch,
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    StartRollout,
    UpgradeResult,
    WakeUp,
)
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_common.status import Track
from rollout_planner.engine import decide, new_state

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
MIN = 60.0
HOUR = 3600.0
DAY = 86400.0
V30 = "1.30.5-gke.1000"
V31 = "1.31.13-gke.1023000"
V32 = "1.32.9-gke.1108000"
V33 = "1.33.5-gke.1162000"
CP = Track.CONTROL_PLANE
NODES = Track.NODES


def cluster(name: str, version: str = V30, **fields: Any) -> Cluster:
    labels = fields.pop("labels", {"env": name.split("-")[0]})
    return Cluster.model_validate({"name": name, "version": version, "labels": labels, **fields})


def stage(name: str, **fields: Any) -> dict[str, Any]:
    if not any(k in fields for k in ("clusterSelector", "clusterNames", "clusterGroup")):
        fields["clusterSelector"] = {"matchLabels": {"env": name}}
    return {"name": name, **fields}


def sequence(*stages: dict[str, Any], channel: str = "regular") -> Sequence:
    return Sequence.model_validate({"name": "main", "channel": channel, "stages": list(stages)})


class Driver:
    """Keeps the engine state, the clock and the command ids of what is running."""

    def __init__(self, seq: Sequence, clusters: Iterable[Cluster]) -> None:
        self.state = new_state(seq, list(clusters))
        self.now = T0
        self.running: dict[tuple[str, Track], tuple[str, str]] = {}
        self.history: list[Command] = []

    def send(self, *events: Event, at: float | None = None) -> list[Command]:
        if at is not None:
            self.now = T0 + at
        event: Event | EventBatch
        if not events:
            event = WakeUp()
        elif len(events) == 1:
            event = events[0]
        else:
            event = EventBatch(events=tuple(events))
        _, commands = decide(self.state, event, self.now)
        for command in commands:
            if isinstance(command, StageAdvance):
                for name in command.clusters:
                    self.running[(name, command.track)] = (command.command_id, command.version)
        self.history += commands
        return commands

    def release(
        self, targets: dict[str, str], *, at: float = 0.0, event_id: str = "rel-1", channel: str = "regular"
    ) -> list[Command]:
        return self.send(ReleaseTarget(event_id=event_id, channel=channel, targets=targets), at=at)

    def start(
        self, version: str, tracks: tuple[Track, ...] = (CP, NODES), *, at: float = 0.0, event_id: str = "start-1"
    ) -> list[Command]:
        return self.send(StartRollout(event_id=event_id, version=version, tracks=tracks), at=at)

    def result(self, name: str, track: Track, outcome: str = "succeeded") -> UpgradeResult:
        command_id, version = self.running.pop((name, track))
        return UpgradeResult(
            command_id=command_id,
            cluster=name,
            track=track,
            version=version,
            outcome=outcome,
            error="boom" if outcome == "failed" else None,
        )

    def finish(
        self, names: Iterable[str], track: Track, *, at: float, outcome: str = "succeeded", ready: bool = False
    ) -> list[Command]:
        """Upgrade results for `names` (and, if asked, readiness right away) in one instant."""
        events: list[Event] = [self.result(n, track, outcome) for n in names]
        if ready:
            events += [Readiness(cluster=n, ready=True) for n in names]
        return self.send(*events, at=at)

    def ready(self, names: Iterable[str], *, at: float, ready: bool = True) -> list[Command]:
        return self.send(*[Readiness(cluster=n, ready=ready) for n in names], at=at)

    def wake(self, *, at: float) -> list[Command]:
        return self.send(WakeUp(), at=at)

    def command(self, action: str, *, at: float, command_id: str = "cmd-1", **fields: Any) -> list[Command]:
        """An operator command; one that changes rollouts is for all of them unless it names one (OPS-5)."""
        if action != "soak_override" and "rollout_id" not in fields:
            fields.setdefault("all_rollouts", True)
        return self.send(OperatorCommand(command_id=command_id, action=action, **fields), at=at)

    def upsert(self, spec: Cluster, *, at: float) -> list[Command]:
        return self.send(InventoryChange(action="upsert", cluster=spec), at=at)

    def remove(self, name: str, *, at: float) -> list[Command]:
        return self.send(InventoryChange(action="remove", name=name), at=at)


def advances(commands: Iterable[Command], track: Track | None = None) -> list[tuple[str, str, str, list[str]]]:
    """(stage, track, version, clusters) of every StageAdvance, in order."""
    return [
        (c.stage, c.track.value, c.version, list(c.clusters))
        for c in commands
        if isinstance(c, StageAdvance) and (track is None or c.track is track)
    ]


def transitions(commands: Iterable[Command]) -> list[tuple[str, str, str, str | None]]:
    """(stage, track, state, version) of every StageTransition, in order."""
    return [(c.stage, c.track.value, c.state.value, c.version) for c in commands if isinstance(c, StageTransition)]


def acks(commands: Iterable[Command]) -> list[tuple[str, bool, str]]:
    return [(c.command_id, c.accepted, c.reason) for c in commands if isinstance(c, CommandAck)]


def waits(commands: Iterable[Command]) -> list[tuple[str, str, list[tuple[str, str | None, dict[str, Any]]]]]:
    return [
        (c.stage, c.track.value, [(w.rule, w.partition, dict(w.numbers)) for w in c.waits])
        for c in commands
        if isinstance(c, WaitChanged)
    ]


def notices(commands: Iterable[Command]) -> list[tuple[str, str | None]]:
    return [(c.code, c.cluster) for c in commands if isinstance(c, Notice)]


def names(prefix: str, count: int, width: int = 2) -> list[str]:
    return [f"{prefix}-{i:0{width}d}" for i in range(1, count + 1)]


def wait_for(commands: Iterable[Command], track: Track, rule: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(partition, numbers) of each wait with `rule` in the last WaitChanged for `track`."""
    changed = [c for c in commands if isinstance(c, WaitChanged) and c.track is track]
    if not changed:
        return []
    return [(w.partition, dict(w.numbers)) for w in changed[-1].waits if w.rule == rule]
