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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.live import Live

from rollout_adapters.web_dashboard.thread_site import url_of
from rollout_cli import help_text
from rollout_cli.dashboard import dashboard, status_view
from rollout_cli.demo_observer import LogLine, Observer
from rollout_cli.demo_scenario import BUILTIN_CLUSTERS, DemoError, scenario_from
from rollout_cli.demo_simulation import FRAME_SECONDS, MAX_GAP_WALL, Pacer, drive, status_document
from rollout_cli.demo_summary import Summary
from rollout_cli.demo_web import DASHBOARD_PORT, WebDashboard, start_dashboard
from rollout_cli.exit_codes import ExitCode
from rollout_common.duration import format_duration, parse_duration
from rollout_common.status_words import clock_text
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import ScenarioError

# Simulated seconds per wall second: a 10-minute control-plane upgrade takes 0.4 s, and the built-in
# fleet (about 9 busy hours, then the fast-forwarded wait for the forced soak) about 30 s.
DEFAULT_SPEED = 1500.0
RECENT_LINES = 6


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
        _Run(sim=sim, observer=observer, args=args, speed=speed, console=console, web=web).go()
        _keep_serving_if_asked(web, args)
    finally:
        if web is not None:
            web.stop()
    return 0


def _checked_request(args: argparse.Namespace) -> tuple[Simulator, float, float | None]:
    """The simulator of the scenario asked for, the speed and the --status-at moment, all checked."""
    scenario = scenario_from(args)
    speed = _checked_speed(args.speed)
    status_at = _checked_status_at(args.status_at, until=scenario.until)
    return Simulator(scenario), speed, status_at


def _dashboard_started(web: WebDashboard, args: argparse.Namespace) -> bool:
    try:
        url = start_dashboard(web, host=args.dashboard_host, port=args.dashboard_port)
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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """One run of the demo: the simulator, its observer, and how the person asked to see it."""

    sim: Simulator
    observer: Observer
    args: argparse.Namespace
    speed: float
    console: Console
    web: WebDashboard | None

    def go(self) -> None:
        began = time.monotonic()
        self._drive()
        self.sim.finish()
        if self.web is not None:
            self.web.publish(force=True)
        summary = Summary.of(self.sim, self.observer, wall=time.monotonic() - began)
        if self.args.json:
            json.dump(summary.as_json(), sys.stdout)
            sys.stdout.write("\n")
        else:
            summary.show(self.console)

    def _drive(self) -> None:
        """Run the simulation to its end: unpaced for --json, logged for --no-live, drawn live otherwise."""

        def published(t: float) -> None:
            if self.web is not None:
                self.web.publish()

        if self.args.json:
            drive(self.sim, Pacer(0.0), on_step=lambda t: self.observer.after_step(t))
        elif self.args.no_live:

            def logged(t: float) -> None:
                _print_lines(self.observer.after_step(t), self.sim)
                published(t)

            drive(self.sim, Pacer(self.speed), on_step=logged)
        else:
            _run_live(self.sim, self.observer, speed=self.speed, console=self.console, on_step=published)


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


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


# -- the live view and the log lines -----------------------------------------------------------------


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


def _log_text(line: LogLine, sim: Simulator) -> str:
    return f"{clock_text(sim.origin + line.t)}  T+{format_duration(line.t):<9} {line.text}"


def _print_lines(lines: list[LogLine], sim: Simulator) -> None:
    for line in lines:
        print(_log_text(line, sim), flush=True)
