"""`rollout demo`: the whole flow in one process on a simulated clock, drawn live or logged line by line.

It drives the conformance simulator (same engine as the planner service, in-memory world) one instant
at a time and paces the instants against the wall clock, so a person sees stages soak, partitions
fill and gates hold, with the reason for every wait, in well under a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.live import Live

from rollout_adapters.web_dashboard import Feed, dashboard_app
from rollout_adapters.web_dashboard.thread_site import ThreadSite, url_of
from rollout_cli import help_text
from rollout_cli.dashboard import (
    Attention,
    attention_table,
    dashboard,
    status_view,
    summary_table,
)
from rollout_cli.exit_codes import ExitCode
from rollout_common.commands import Command, Notice, RolloutTransition, StageAdvance, StageTransition, Wait
from rollout_common.duration import format_duration, parse_duration
from rollout_common.status import TRACKS
from rollout_common.status_words import clock_text, names_text
from rollout_planner.engine.model import TRACK_INDEXES
from rollout_planner.engine.reasons import describe_waits, window_waits
from rollout_planner.engine.views import cluster_status
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.status_document import status_document as planner_status
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario, ScenarioError, load_scenario

# Simulated seconds per wall second: a 10-minute control-plane upgrade takes 0.4 s, and the built-in
# fleet (about 9 busy hours, then the fast-forwarded wait for the forced soak) about 30 s.
DEFAULT_SPEED = 1500.0
# A quiet stretch (a soak, the 30-day forced-soak deadline) never takes longer than this on the wall
# clock; the simulated clock visibly races through it instead of freezing the screen.
MAX_GAP_WALL = 1.5
FRAME_SECONDS = 0.1
BUILTIN_CLUSTERS = 300
# demo.yaml names stg-canary-2 and prod-003 (the outage and the failure), so every generated group keeps
# at least three clusters whatever --clusters says.
MIN_PER_GROUP = 3
RECENT_LINES = 6
DASHBOARD_PORT = 8090
# the web dashboard gets a fresh snapshot at most this often (wall seconds): a 100,000-cluster fleet
# takes a noticeable moment to walk, the page polls every 2 s anyway
PUBLISH_SECONDS = 0.5


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    demo = help_text.command(
        sub,
        "demo",
        summary="watch a simulated 3-stage rollout of a built-in fleet (no Kafka needed)",
        description="Runs a whole rollout in one process on a simulated clock: the built-in fleet "
        "(test -> staging -> prod, manual and automatic partitions, an outage, a failed "
        "upgrade) or any scenario file.",
        examples=[
            "rollout demo",
            "rollout demo --clusters 1000 --speed 0 --no-live",
            "rollout demo --status-at 9h10m",
            "rollout demo --scenario scenario.yaml --json",
        ],
    )
    _fleet_options(demo)
    _output_options(demo)
    _dashboard_options(demo)
    demo.set_defaults(handler=run_demo)


def _fleet_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--clusters",
        type=int,
        default=None,
        metavar="N",
        help=f"size of the built-in fleet, e.g. --clusters 1000 (default {BUILTIN_CLUSTERS})",
    )
    demo.add_argument(
        "--speed",
        type=float,
        default=DEFAULT_SPEED,
        metavar="S",
        help=f"simulated seconds per wall second (default {DEFAULT_SPEED:g}); 0 = as fast as "
        f"possible. Quiet stretches are fast-forwarded in at most {MAX_GAP_WALL:g} s",
    )


def _output_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument("--no-live", action="store_true", help="print timestamped log lines instead of a live view")
    demo.add_argument(
        "--scenario", type=Path, metavar="FILE", help="run this scenario file instead, e.g. scenario.yaml"
    )
    demo.add_argument("--json", action="store_true", help="no animation; print the summary as one JSON object")
    demo.add_argument(
        "--status-at",
        metavar="T",
        help="run to simulated time T (such as 2h or 9h10m after the start) as fast as possible, print the "
        "`rollout status` screen of that moment and exit; with --json, the status document instead",
    )


def _dashboard_options(demo: argparse.ArgumentParser) -> None:
    demo.add_argument(
        "--dashboard-port",
        type=int,
        default=None,
        metavar="P",
        help=f"serve the web dashboard on this port, e.g. --dashboard-port 8091 (default {DASHBOARD_PORT}, or "
        "any free port when that one is taken; 0 = any free port)",
    )
    demo.add_argument(
        "--dashboard-host",
        default="127.0.0.1",
        metavar="H",
        help="address the web dashboard binds, e.g. --dashboard-host 0.0.0.0 to share it (default 127.0.0.1, "
        "this machine only)",
    )
    demo.add_argument("--no-dashboard", action="store_true", help="no web dashboard")
    demo.add_argument(
        "--keep-serving",
        action="store_true",
        help="keep the web dashboard up after the run until Ctrl-C (the default when run from a terminal)",
    )


class DemoError(Exception):
    """Something the person asked for that cannot run; shown as one line, exit code 1 (invalid input)."""


def run_demo(args: argparse.Namespace) -> int:
    try:
        sim, speed, status_at = _checked_request(args)
    except (DemoError, ScenarioError, ValueError) as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return ExitCode.REJECTED
    console = Console(width=None if sys.stdout.isatty() else 120)
    if status_at is not None:
        return _status_at(sim, status_at, console=console, as_json=args.json)
    observer = Observer(sim)
    web = None if args.json or args.no_dashboard else WebDashboard(sim)
    if web is not None and not _dashboard_started(web, args):
        return 2
    try:
        _run(sim, observer, args=args, speed=speed, console=console, web=web)
        _keep_serving_if_asked(web, args)
    finally:
        if web is not None:
            web.stop()
    return 0


def _checked_request(args: argparse.Namespace) -> tuple[Simulator, float, float | None]:
    """The simulator of the scenario asked for, the speed and the --status-at moment, all checked."""
    scenario = _scenario_from(args)
    speed = _checked_speed(args.speed)
    status_at = _checked_status_at(args.status_at, until=scenario.until)
    return Simulator(scenario), speed, status_at


def _dashboard_started(web: WebDashboard, args: argparse.Namespace) -> bool:
    try:
        url = _start_dashboard(web, host=args.dashboard_host, port=args.dashboard_port)
    except OSError as exc:
        print(f"error: the dashboard cannot listen on {args.dashboard_host}: {exc}", file=sys.stderr)
        return False
    # stderr: stdout is the log (--no-live) or the live view
    print(f"dashboard: {url}", file=sys.stderr, flush=True)
    return True


def _keep_serving_if_asked(web: WebDashboard | None, args: argparse.Namespace) -> None:
    # a person at a terminal gets to look at the finished rollout; a script or a pipe gets its exit
    if web is not None and (args.keep_serving or (sys.stdin.isatty() and sys.stdout.isatty())):
        print(
            f"the run is over; the dashboard stays at {url_of(args.dashboard_host, web.port)} until Ctrl-C",
            file=sys.stderr,
            flush=True,
        )
        _wait_for_interrupt()


def _run(
    sim: Simulator,
    observer: Observer,
    *,
    args: argparse.Namespace,
    speed: float,
    console: Console,
    web: WebDashboard | None,
) -> None:
    began = time.monotonic()
    _drive_as_asked(sim, observer, args=args, speed=speed, console=console, web=web)
    sim.finish()
    if web is not None:
        web.publish(force=True)
    summary = Summary.of(sim, observer, wall=time.monotonic() - began)
    if args.json:
        json.dump(summary.as_json(), sys.stdout)
        sys.stdout.write("\n")
    else:
        summary.show(console)


def _drive_as_asked(
    sim: Simulator,
    observer: Observer,
    *,
    args: argparse.Namespace,
    speed: float,
    console: Console,
    web: WebDashboard | None,
) -> None:
    """Run the simulation to its end: unpaced for --json, logged for --no-live, drawn live otherwise."""

    def published(t: float) -> None:
        if web is not None:
            web.publish()

    if args.json:
        drive(sim, Pacer(0.0), on_step=lambda t: observer.after_step(t))
    elif args.no_live:

        def logged(t: float) -> None:
            _print_lines(observer.after_step(t), sim)
            published(t)

        drive(sim, Pacer(speed), on_step=logged)
    else:
        _run_live(sim, observer, speed=speed, console=console, on_step=published)


def _start_dashboard(web: WebDashboard, *, host: str, port: int | None) -> str:
    """On the port asked for; by default on DASHBOARD_PORT, or any free one when another demo holds it."""
    if port is not None:
        return web.start(host=host, port=port)
    try:
        return web.start(host=host, port=DASHBOARD_PORT)
    except OSError:
        return web.start(host=host, port=0)


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


class WebDashboard:
    """The web dashboard of the demo: served from a thread, fed a snapshot of the simulation now and then."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.feed = Feed()
        self.site: ThreadSite | None = None
        self.port = 0
        self._published = float("-inf")

    def start(self, *, host: str, port: int) -> str:
        title = f"rollout demo · {self.sim.scenario.name} · {len(self.sim.state.clusters)} clusters"
        self.publish(force=True)
        self.site = ThreadSite(dashboard_app(self.feed.current, title=title), host=host, port=port)
        self.port = self.site.start()
        return url_of(host, self.port)

    def publish(self, *, force: bool = False) -> None:
        wall = time.monotonic()
        if force or wall - self._published >= PUBLISH_SECONDS:
            doc = status_document(self.sim)
            # before the first instant the engine's clock is unset: the page shows the scenario's start
            doc["now"] = max(float(doc["now"]), self.sim.origin)
            self.feed.publish(doc, attention_rows(self.sim.state))
            self._published = wall

    def stop(self) -> None:
        if self.site is not None:
            self.site.stop()


def _one_line(text: str) -> str:
    """Scenario errors list one problem per line; a person gets them on a single line."""
    lines = [line.strip().removeprefix("- ") for line in text.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else f"{lines[0]}: " + "; ".join(lines[1:])


def _checked_speed(speed: float) -> float:
    if not speed >= 0:  # also rejects NaN
        raise DemoError(f"--speed must be 0 (as fast as possible) or positive, not {speed:g}")
    return speed


def _checked_status_at(text: str | None, *, until: float) -> float | None:
    if text is None:
        return None
    try:
        at = parse_duration(text.strip().removeprefix("T+"), field="--status-at")
    except ValueError as exc:
        raise DemoError(f"--status-at {text!r}: expected a time after the start such as 2h or 9h10m") from exc
    if at > until:
        raise DemoError(f"--status-at {text} is after the end of the run ({format_duration(until)} after the start)")
    return at


def _status_at(sim: Simulator, at: float, *, console: Console, as_json: bool) -> int:
    """Decide every instant up to `at` (seconds after the start), then show the status screen of that moment."""
    sim.start()
    while (t := sim.next_time()) is not None and t <= at:
        sim.step()
    doc = status_document(sim)
    if as_json:
        json.dump(doc, sys.stdout, default=str)
        sys.stdout.write("\n")
        return 0
    title = f"rollout status · demo {sim.scenario.name} · {len(sim.state.clusters)} clusters"
    console.print(
        status_view(doc, clock=sim.origin + at, title=title, clock_label="simulated clock", origin=sim.origin)
    )
    return 0


# -- the scenario ------------------------------------------------------------------------------------


def _scenario_from(args: argparse.Namespace) -> Scenario:
    if args.scenario is not None:
        if args.clusters is not None:
            raise DemoError("--clusters sizes the built-in fleet; a --scenario file sets its own fleet")
        return load_scenario(args.scenario)
    clusters = BUILTIN_CLUSTERS if args.clusters is None else args.clusters
    return builtin_scenario(clusters=clusters)


def builtin_scenario(*, clusters: int = BUILTIN_CLUSTERS) -> Scenario:
    text = resources.files("rollout_cli").joinpath("scenarios/demo.yaml").read_text(encoding="utf-8")
    return Scenario.model_validate(scale_fleet(yaml.safe_load(text), clusters=clusters))


def scale_fleet(raw: dict[str, Any], *, clusters: int) -> dict[str, Any]:
    """The scenario with its `generate` counts scaled to `clusters` in total, same proportions."""
    groups = raw.get("generate", [])
    base = sum(group["count"] for group in groups)
    minimum = MIN_PER_GROUP * len(groups)
    if clusters < minimum:
        raise DemoError(f"--clusters must be at least {minimum} (the demo keeps {MIN_PER_GROUP} per group)")
    counts = [max(MIN_PER_GROUP, round(group["count"] * clusters / base)) for group in groups]
    # rounding drift goes to the largest group, so the total is exactly what was asked for
    largest = counts.index(max(counts))
    counts[largest] += clusters - sum(counts)
    scaled = dict(raw)
    scaled["generate"] = [{**group, "count": count} for group, count in zip(groups, counts, strict=True)]
    scaled["sequence"] = _scaled_thresholds(raw["sequence"], factor=clusters / base)
    return scaled


def _scaled_thresholds(sequence: dict[str, Any], *, factor: float) -> dict[str, Any]:
    """Scale autoPartitionThreshold with the fleet, so prod keeps several partitions at any size."""
    stages = []
    for stage in sequence["stages"]:
        strategy = stage.get("rolloutStrategy") or {}
        if "autoPartitionThreshold" in strategy:
            threshold = max(1, round(strategy["autoPartitionThreshold"] * factor))
            stage = {**stage, "rolloutStrategy": {**strategy, "autoPartitionThreshold": threshold}}
        stages.append(stage)
    return {**sequence, "stages": stages}


# -- driving the simulator against the wall clock ----------------------------------------------------


class Pacer:
    """Turns a jump of the simulated clock into wall time, calling `on_frame` with the clock meanwhile."""

    def __init__(self, speed: float, *, on_frame: Callable[[float], None] | None = None) -> None:
        self.speed = speed
        self.on_frame = on_frame

    def advance(self, start: float, end: float) -> None:
        if self.speed <= 0 or end <= start:
            return
        wall = min((end - start) / self.speed, MAX_GAP_WALL)
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < wall:
            if self.on_frame is not None:
                self.on_frame(start + (end - start) * elapsed / wall)
            time.sleep(min(FRAME_SECONDS, wall - elapsed))


def drive(sim: Simulator, pacer: Pacer, *, on_step: Callable[[float], object]) -> None:
    """Run the simulation to its end, instant by instant, waiting on the pacer before each one."""
    sim.start()
    previous = 0.0
    while (t := sim.next_time()) is not None:
        pacer.advance(previous, t)
        sim.step()
        previous = t
        on_step(t)


def status_document(sim: Simulator) -> dict[str, Any]:
    """The planner service's own status document, so the demo draws what `rollout status` would show."""
    return planner_status(sim.state, batch=sim.report.decisions)


def _run_live(
    sim: Simulator, observer: Observer, *, speed: float, console: Console, on_step: Callable[[float], None]
) -> None:
    title = f"rollout demo · {sim.scenario.name} · {len(sim.state.clusters)} clusters"
    footer = f"speed {speed:g}x, quiet stretches fast-forwarded · Ctrl-C stops" if speed else "speed: max"
    doc = status_document(sim)
    last_draw = 0.0

    def draw(clock: float) -> None:
        nonlocal last_draw
        recent = [f"T+{format_duration(line.t):<9} {line.text}" for line in observer.lines[-RECENT_LINES:]]
        live.update(
            dashboard(doc, clock=clock, title=title, origin=sim.origin, recent=recent, footer=footer), refresh=True
        )
        last_draw = time.monotonic()

    def stepped(t: float) -> None:
        nonlocal doc
        observer.after_step(t)
        on_step(t)
        # at --speed 0 instants come faster than a terminal can draw: redraw at most once a frame
        if speed or time.monotonic() - last_draw >= FRAME_SECONDS:
            doc = status_document(sim)
            draw(sim.origin + t)

    with Live(console=console, auto_refresh=False) as live:
        drive(sim, Pacer(speed, on_frame=lambda t: draw(sim.origin + t)), on_step=stepped)
        doc = status_document(sim)
        draw(sim.state.now)


# -- what happened, as log lines ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogLine:
    t: float
    text: str


def _log_text(line: LogLine, sim: Simulator) -> str:
    return f"{clock_text(sim.origin + line.t)}  T+{format_duration(line.t):<9} {line.text}"


def _print_lines(lines: list[LogLine], sim: Simulator) -> None:
    for line in lines:
        print(_log_text(line, sim), flush=True)


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


# -- the summary -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Summary:
    scenario: str
    clusters: int
    simulated: float
    wall: float
    batches: int
    rollouts: dict[str, str]
    doc: dict[str, Any]
    attention: list[Attention]
    log: list[LogLine]

    @classmethod
    def of(cls, sim: Simulator, observer: Observer, *, wall: float) -> Summary:
        return cls(
            scenario=sim.scenario.name,
            clusters=len(sim.state.clusters),
            simulated=sim.state.now - sim.origin,
            wall=wall,
            batches=len(sim.report.batches),
            rollouts={r.id: r.state.value for r in sim.state.rollouts.values()},
            doc=status_document(sim),
            attention=list(_attention(sim, observer)),
            log=observer.lines,
        )

    def show(self, console: Console) -> None:
        console.print()
        console.print(summary_table(self.doc))
        console.print(attention_table(self.attention))
        rollouts = ", ".join(f"{rid} {state}" for rid, state in self.rollouts.items()) or "no rollout started"
        console.print(
            f"{self.scenario}: {self.clusters} clusters, {self.batches} batches, "
            f"{format_duration(self.simulated)} simulated in {self.wall:.1f} s; rollout: {rollouts}",
            markup=False,
            highlight=False,
        )

    def as_json(self) -> dict[str, Any]:
        stages = {
            stage["name"]: {
                name: {key: track[key] for key in ("state", "version", "qualified", "counts")}
                for name, track in stage["tracks"].items()
            }
            for stage in self.doc["stages"]
        }
        return {
            "scenario": self.scenario,
            "clusters": self.clusters,
            "simulatedSeconds": self.simulated,
            "batches": self.batches,
            "rollouts": self.rollouts,
            "stages": stages,
            "attention": [asdict(row) for row in self.attention],
            "log": [{"t": line.t, "text": line.text} for line in self.log],
        }


def _attention(sim: Simulator, observer: Observer) -> Iterator[Attention]:
    for failure in observer.failures:
        yield Attention(
            cluster=str(failure["cluster"]),
            kind="upgrade failed",
            status=_status_now(sim, str(failure["cluster"])),
            reason=f"{failure['track']} upgrade to {failure['version']} at "
            f"T+{format_duration(float(failure['t']))}: {failure['error']}",
        )
    for outage in observer.outages:
        held = "; ".join(outage.held.values()) or "it held no gate"
        yield Attention(
            cluster=outage.cluster,
            kind="offline",
            status=_status_now(sim, outage.cluster),
            reason=f"not ready from T+{format_duration(outage.start)} to "
            f"T+{format_duration(outage.until)} (simulation.notReady); while out: {held}",
        )


def _status_now(sim: Simulator, name: str) -> str:
    record = sim.state.clusters.get(name)
    if record is None:
        return "UNKNOWN"
    status, _ = cluster_status(sim.state, record)
    return status.value
