"""Runs a scenario on a simulated clock with the planner's own engine, and builds the report."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

from rollout_common.check_judgement import judge_value
from rollout_common.check_results import CheckResult
from rollout_common.commands import CheckSeries, Command, CommandAck, StageAdvance, StageTransition, WakeAt
from rollout_common.events import (
    Event,
    EventBatch,
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    SequenceChange,
    StartRollout,
    WakeUp,
)
from rollout_common.status import Track
from rollout_common.window import to_epoch
from rollout_planner.engine import decide, new_state
from rollout_planner.engine.errors import EngineInvariantError
from rollout_planner.engine.model import EngineState
from rollout_planner.engine.partitioning import StagePlan, assign_stages, plan_partitions
from rollout_planner.engine.views import cluster_status, stage_track_state
from rollout_planner.simulation.scenario import Scenario, ScriptEvent
from rollout_planner.simulation.world import Finish, World

_MAX_ROUNDS_PER_INSTANT = 100


class SimulationError(RuntimeError):
    """The engine could not apply an event: one line naming the event, the time and the rule."""


@dataclass(slots=True)
class Report:
    plan: dict[str, Any]
    batches: list[dict[str, Any]] = field(default_factory=list)
    cluster_events: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] = field(default_factory=dict)
    decisions: int = 0
    commands: list[Command] = field(default_factory=list)
    acks: list[dict[str, Any]] = field(default_factory=list)  # FORMAT's `commands` (OPS-3)
    checks: list[dict[str, Any]] = field(default_factory=list)  # FORMAT's `checks` (CHK-2)

    def as_json(self) -> dict[str, Any]:
        out = {
            "plan": self.plan,
            "batches": self.batches,
            "clusterEvents": self.cluster_events,
            "transitions": self.transitions,
            "final": self.final,
            "commands": self.acks,
        }
        if self.checks:  # a scenario without checks reports exactly what it did before them
            out["checks"] = self.checks
        return out


def plan_of(scenario: Scenario) -> tuple[list[StagePlan], list[str]]:
    fleet = scenario.fleet()
    membership = assign_stages(scenario.sequence, fleet, scenario.cluster_groups)
    by_name = {c.name: c for c in fleet}
    plans = []
    warnings: list[str] = []
    for index, stage in enumerate(scenario.sequence.stages):
        members = [by_name[n] for n, i in membership.stage_of.items() if i == index]
        plan = plan_partitions(stage, members, scenario.cluster_groups)
        plans.append(plan)
        warnings += plan.warnings
    for name, stages in membership.conflicts.items():
        warnings.append(f"cluster {name} matches stages {', '.join(stages)} and joins none (SEQ-2)")
    if membership.other_channel:
        warnings.append(
            f"{len(membership.other_channel)} cluster(s) on another channel are ineligible (SEQ-3): "
            f"{', '.join(membership.other_channel[:10])}"
        )
    return plans, warnings


class Simulator:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.origin = to_epoch(scenario.start)
        self.world = World(scenario.simulation)
        self.state: EngineState = new_state(scenario.sequence, scenario.fleet(), scenario.cluster_groups)
        self.queue: list[tuple[float, int, str, Any]] = []
        self.counter = itertools.count()
        self.event_ids = itertools.count(1)
        plans, warnings = plan_of(scenario)
        self.report = Report(plan={"stages": [_plan_json(p) for p in plans], "warnings": warnings})
        self.watch: set[str] = set()
        self.ack_keys: dict[str, str] = {}  # command id -> the scenario's name for the command
        # CHK-2: the running series, (rollout, stage, check) -> when it started (seconds since start)
        self.series: dict[tuple[str, str, str], float] = {}

    def _push(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.queue, (t, next(self.counter), kind, payload))

    def run(self) -> Report:
        self.start()
        while self.step() is not None:
            pass
        return self.finish()

    # Stepping API: `rollout demo` paces the same loop against a wall clock and draws between instants.
    def start(self) -> None:
        """Queue the script, the scripted health edges and the first wake-up; call once, before step()."""
        for event in self.scenario.events:
            self._push(event.at, "script", event)
        for edge, name in self.world.window_edges():
            self._push(edge, "health", name)
        self._push(0.0, "wake", None)

    def next_time(self) -> float | None:
        """When the next instant happens (seconds since start), or None when the run is over."""
        if self.queue and self.queue[0][0] <= self.scenario.until:
            return self.queue[0][0]
        return None

    def step(self) -> float | None:
        """Process the next instant and return its time, or None when nothing is left before `until`."""
        t = self.next_time()
        if t is not None:
            self._instant(t)
        return t

    def finish(self) -> Report:
        """Fill in the report's final section (cluster statuses, stage states) and return the report."""
        self._finalize()
        return self.report

    def _instant(self, t: float) -> None:
        events: list[Event] = []
        touched: list[str] = []
        wake = False
        while self.queue and self.queue[0][0] == t:
            _, _, kind, payload = heapq.heappop(self.queue)
            if kind == "script":
                events += self._script(payload)
            elif kind == "finish":
                events.append(self.world.finish(t=t, item=payload))
                touched.append(payload.cluster)
            elif kind == "health":
                touched.append(payload)
            elif kind == "check":
                events += self._due(payload, t)
            else:
                wake = True
        events += self._observe(touched, t)
        for _ in range(_MAX_ROUNDS_PER_INSTANT):
            if not events and not wake:
                break
            wake = False
            commands = self._decide(events, t)
            events = self._carry_out(commands, t)

    def _observe(self, names: list[str], t: float) -> list[Event]:
        out: list[Event] = []
        for name in dict.fromkeys(names):
            change, again = self.world.observe(name, t)
            if change is not None:
                out.append(change)
            if again is not None:
                self._push(again, "health", name)
        return out

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        self.report.decisions += 1
        rollouts = len(self.state.rollouts)
        try:
            _, commands = decide(self.state, EventBatch(events=tuple(events)), self.origin + t)
        except Exception as exc:  # every engine failure becomes one line (item: no traceback)
            raise SimulationError(_failure(exc, events, t)) from exc
        self._release_acks(events, t, rollouts)
        return commands

    def _release_acks(self, events: list[Event], t: float, before: int) -> None:
        """FORMAT `commands`: a release or on-demand start is accepted when it started a rollout."""
        started = {r.event_id for r in list(self.state.rollouts.values())[before:]}
        for event in events:
            if isinstance(event, (ReleaseTarget, StartRollout)):
                key = "releaseTarget" if isinstance(event, ReleaseTarget) else "startRollout"
                accepted = event.event_id in started
                reason = None if accepted else "already applied, or for another channel (START-4, SEQ-3)"
                self.report.acks.append({"t": t, "command": key, "accepted": accepted, "reason": reason})

    def _carry_out(self, commands: list[Command], t: float) -> list[Event]:
        started: list[str] = []
        checked: list[Event] = []
        for command in commands:
            self.report.commands.append(command)
            if isinstance(command, StageAdvance):
                self._batch(command, t)
                started += command.clusters
            elif isinstance(command, StageTransition):
                self.report.transitions.append(_transition_json(command, t))
            elif isinstance(command, WakeAt):
                self._push(max(t, command.at - self.origin), "wake", None)
            elif isinstance(command, CheckSeries):
                checked += self._series(command, t)
            elif isinstance(command, CommandAck):
                key = self.ack_keys.get(command.command_id, "command")
                self.report.acks.append(
                    {"t": t, "command": key, "accepted": command.accepted, "reason": command.reason}
                )
        return checked + self._observe(started, t)

    def _series(self, command: CheckSeries, t: float) -> list[Event]:
        """FORMAT: a series evaluates at once when it starts, then every interval while it runs."""
        key = (command.rollout_id, command.stage, command.check)
        since = command.since - self.origin
        if not command.running:
            if self.series.get(key) == since:
                del self.series[key]
            return []
        self.series[key] = since
        return self._due((key, since, command.interval), t)

    def _due(self, item: tuple[tuple[str, str, str], float, float], t: float) -> list[Event]:
        """An evaluation of a series falls due: judge the scenario's metric now, queue the next one."""
        key, since, interval = item
        if self.series.get(key) != since:
            return []  # the series ended (or a newer one started, with its own evaluations)
        self._push(t + interval, "check", item)
        rollout_id, stage_name, name = key
        stage = self.state.stage_by_name.get(stage_name)
        check = None if stage is None else next((c for c in stage.spec.checks if c.name == name), None)
        if check is None:
            return []
        outcome, value, reason = judge_value(check, self.scenario.simulation.metric(check.query, t))
        self.report.checks.append(
            {"t": t, "stage": stage_name, "check": name, "value": value, "result": outcome.value, "rollout": rollout_id}
        )
        result = CheckResult(
            rollout_id=rollout_id,
            stage=stage_name,
            check=name,
            observed_at=self.origin + t,
            value=value,
            outcome=outcome,
            reason=reason,
        )
        return [result]

    def _batch(self, command: StageAdvance, t: float) -> None:
        self.report.batches.append(
            {
                "t": t,
                "stage": command.stage,
                "track": command.track.value,
                "partition": command.partition,
                "version": command.version,
                "clusters": list(command.clusters),
            }
        )
        for name in command.clusters:
            end = self.world.start(
                t=t, cluster=name, track=command.track, version=command.version, command_id=command.command_id
            )
            failed = self.world.should_fail(name, command.track)
            self._push(end, "finish", Finish(name, command.track, command.version, command.command_id, failed))

    def _script(self, event: ScriptEvent) -> list[Event]:
        return self.script_events(event)

    def script_events(self, event: ScriptEvent) -> list[Event]:
        """The engine events one scripted entry stands for (ids numbered in script order)."""
        number = next(self.event_ids)
        out: list[Event] = []
        if event.release_target is not None:
            spec = event.release_target
            out.append(
                ReleaseTarget(event_id=spec.id or f"release-{number}", channel=spec.channel, targets=spec.targets)
            )
        start = event.start_rollout or (event.command.start_rollout if event.command else None)
        if start is not None:
            out.append(StartRollout(event_id=f"start-{number}", version=start.version, tracks=start.tracks))
        if event.command is not None and event.command.action != "start_rollout":
            command = _operator(event, number)
            self.ack_keys[command.command_id] = _KEYS[command.action]
            out.append(command)
        if event.sequence is not None:
            change = SequenceChange(command_id=f"seq-{number}", sequence=event.sequence)
            self.ack_keys[change.command_id] = "sequence"
            out.append(change)
        if event.inventory is not None:
            if event.inventory.upsert is not None:
                name = event.inventory.upsert.name
                out.append(InventoryChange(action="upsert", cluster=event.inventory.upsert))
                if not self.world.healthy(name, event.at)[0]:
                    # a cluster (re)joining the inventory starts as ready in the planner; its health
                    # reporter says at once that it is not (the world reports changes only)
                    out.append(Readiness(cluster=name, ready=False))
            if event.inventory.remove is not None:
                out.append(InventoryChange(action="remove", name=event.inventory.remove))
        return out

    def _finalize(self) -> None:
        self.report.cluster_events = self.world.events
        clusters = {}
        for name, record in sorted(self.state.clusters.items()):
            status, reason = cluster_status(self.state, record)
            clusters[name] = {
                "controlPlane": record.versions[0].text,
                "nodes": record.versions[1].text,
                "status": status.value,
                "reason": reason,
            }
        stages = {
            s.spec.name: {"controlPlane": stage_track_state(s, 0), "nodes": stage_track_state(s, 1)}
            for s in self.state.stages
        }
        self.report.final = {"clusters": clusters, "stages": stages}


_KEYS = {
    "pause": "pause",
    "resume": "resume",
    "cancel": "cancel",
    "retry": "retry",
    "soak_override": "soakOverride",
    "approve": "approve",
}


def _operator(event: ScriptEvent, number: int) -> OperatorCommand:
    """FORMAT: a scenario's command names no rollout; it is for every rollout active then (OPS-5)."""
    command = event.command
    if command is None:
        raise ValueError("not a command")
    spec = command.soak_override
    if spec is not None:
        return OperatorCommand(
            command_id=f"cmd-{number}", action="soak_override", stage=spec.stage, version=spec.version, soak=spec.soak
        )
    if command.approve is not None:
        approval = command.approve
        return OperatorCommand(
            command_id=f"cmd-{number}",
            action="approve",
            all_rollouts=True,
            stage=approval.stage,
            gate=approval.gate,
            issued_by=approval.by,
            comment=approval.comment,
        )
    action = command.action
    if action == "start_rollout" or action == "soak_override" or action == "approve":
        raise ValueError(f"{action} is not an operator command")
    retry = command.retry
    return OperatorCommand(
        command_id=f"cmd-{number}",
        action=action,
        all_rollouts=True,
        cluster=None if retry is None else retry.cluster,
        stage=None if retry is None else retry.stage,
    )


def _failure(exc: Exception, events: list[Event], t: float) -> str:
    """One line: when, which events, which rule (the engine's own error names cluster and stage)."""
    kinds = ", ".join(sorted({e.kind for e in events})) or "wake_up"
    rule = exc.rule if isinstance(exc, EngineInvariantError) else "BUS-9"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"engine error at t={t:g}s applying {kinds} ({rule}): {text}"


def _transition_json(command: StageTransition, t: float) -> dict[str, Any]:
    return {
        "t": t,
        "stage": command.stage,
        "track": command.track.value,
        "state": command.state.value,
        "version": command.version,
        "reason": command.reason,
        "rollout": command.rollout_id,
    }


def _plan_json(plan: StagePlan) -> dict[str, Any]:
    return {
        "name": plan.name,
        "partitions": [
            {"name": p.name, "clusters": list(p.clusters), "maxUnavailable": p.max_unavailable} for p in plan.partitions
        ],
        "noPartition": plan.no_partition,
    }


def simulate(scenario: Scenario) -> Report:
    return Simulator(scenario).run()


__all__ = ["Report", "SimulationError", "Simulator", "Track", "WakeUp", "simulate"]
