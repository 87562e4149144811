"""What the demo's simulator did, said as log lines: transitions, batches, failures, outages, waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollout_common.commands import Command, Notice, RolloutTransition, StageAdvance, StageTransition, Wait
from rollout_common.duration import format_duration
from rollout_common.status import TRACKS
from rollout_common.status_words import names_text
from rollout_planner.engine.model import TRACK_INDEXES
from rollout_planner.engine.reasons import describe_waits, window_waits
from rollout_planner.simulation.runner import Simulator


@dataclass(frozen=True, slots=True)
class LogLine:
    t: float
    text: str


@dataclass(slots=True)
class Outage:
    """A scripted notReady window (simulation.notReady) and the gates it held while it lasted."""

    cluster: str
    start: float
    until: float
    held: dict[tuple[str, str, str | None], str] = field(default_factory=dict)


class Observer:
    """Reads what the simulator did since the last instant and says it in one line per fact.

    Facts: stage transitions, batches, failed upgrades, readiness changes of clusters with a scripted
    outage, and changes of the kind of wait (rule and partition) per stage and track (STAT-5).
    """

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.lines: list[LogLine] = []
        self.failures: list[dict[str, Any]] = []
        self.outages = [Outage(w.cluster, w.start, w.until) for w in sim.scenario.simulation.not_ready]
        self._watched = {outage.cluster for outage in self.outages}
        self._commands = 0
        self._events = 0
        self._wait_keys: dict[str, set[tuple[str, str | None]]] = {}

    def after_step(self, t: float) -> list[LogLine]:
        first = len(self.lines)
        for command in self.sim.report.commands[self._commands :]:
            self._command(command, t)
        self._commands = len(self.sim.report.commands)
        for event in self.sim.world.events[self._events :]:
            self._world_event(event)
        self._events = len(self.sim.world.events)
        self._waits(t)
        return self.lines[first:]

    def _say(self, t: float, text: str) -> None:
        self.lines.append(LogLine(t, text))

    def _command(self, command: Command, t: float) -> None:
        if isinstance(command, StageTransition):
            soak = f", soak ends at T+{format_duration(command.until - self.sim.origin)}" if command.until else ""
            self._say(
                t,
                f"{command.stage}/{command.track.value}: {command.state.value} "
                f"{command.version or ''} ({command.reason}{soak})",
            )
        elif isinstance(command, StageAdvance):
            self._say(
                t,
                f"batch {command.stage}/{command.track.value} {command.partition}: "
                f"{len(command.clusters)} cluster(s) -> {command.version} "
                f"({names_text(command.clusters, shown=4)})",
            )
        elif isinstance(command, RolloutTransition):
            self._say(t, f"rollout {command.rollout_id}: {command.state.value} ({command.reason})")
        elif isinstance(command, Notice):
            self._say(t, f"notice: {command.message}")

    def _world_event(self, event: dict[str, Any]) -> None:
        name, kind, t = str(event["cluster"]), event["event"], float(event["t"])
        if kind == "failed":
            error = self._error_of(name, str(event["track"]))
            self.failures.append({**event, "error": error})
            self._say(t, f"FAILED {name} {event['track']} -> {event['version']}: {error}")
        elif kind in ("ready", "notReady") and name in self._watched:
            outage = any(o.cluster == name and o.start <= t < o.until for o in self.outages)
            what = "not ready" + (" (offline)" if outage else "") if kind == "notReady" else "ready"
            self._say(t, f"{name} is {what}")

    def _error_of(self, name: str, track: str) -> str:
        record = self.sim.state.clusters.get(name)
        index = [t.value for t in TRACKS].index(track)
        error = None if record is None else record.failed[index]
        return error or "upgrade failed"

    def _waits(self, t: float) -> None:
        state = self.sim.state
        for stage in state.stages:
            for track in TRACK_INDEXES:
                waits = describe_waits(state, stage, track, with_clusters=True) + window_waits(state, stage, track)
                where = f"{stage.spec.name}/{TRACKS[track].value}"
                self._note_outages(where, waits, t)
                self._wait_changes(where, waits, t)

    def _wait_changes(self, where: str, waits: list[Wait], t: float) -> None:
        """A line per wait that starts (rule and partition, as the engine's WaitChanged), one when all end.

        Numbers move at every instant (unavailable 25, 24, ...); logging each would drown the story.
        """
        before = self._wait_keys.get(where, set())
        now = {(w.rule, w.partition) for w in waits}
        self._wait_keys[where] = now
        for wait in waits:
            if (wait.rule, wait.partition) not in before:
                names = f" [{names_text(wait.clusters)}]" if wait.clusters else ""
                self._say(t, f"waiting {where} {wait.rule}: {wait.message}{names}")
        if before and not now:
            self._say(t, f"{where}: no longer waiting")

    def _note_outages(self, where: str, waits: list[Wait], t: float) -> None:
        """Remember which waits a cluster caused while it was out: the summary's 'reason' for it."""
        for outage in self.outages:
            if not outage.start <= t < outage.until:
                continue
            partition = self._partition_of(outage.cluster)
            for wait in waits:
                named = outage.cluster in wait.clusters or partition in wait.numbers.get("partitions", ())
                if named or (wait.rule == "GATE-1" and wait.partition == partition):
                    outage.held.setdefault((where, wait.rule, wait.partition), f"{where} {wait.rule}: {wait.message}")

    def _partition_of(self, name: str) -> str | None:
        record = self.sim.state.clusters.get(name)
        if record is None or record.stage is None or record.partition is None:
            return None
        return self.sim.state.stages[record.stage].partitions[record.partition].name
