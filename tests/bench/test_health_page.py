"""The benchmark page renders the monitor's CPU per heartbeat at rest and per change beside the
issue's limits (issue 21, item 4): `make bench` measured the first heartbeats only and left this
section to be written by hand."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.health_page import HEALTH_COST_TITLE, health_cost_lines  # noqa: E402
from bench.kafka_targets import verdicts  # noqa: E402

LOAD = "1.00 1.00 1.00 before, 1.00 1.00 1.00 after"


def _run(workers: int, cpu_ms: float, *, kind: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "workers": workers,
        "partitions": 4,
        "heartbeats": 1_000 * workers,
        "wall_s": 10.0,
        "readiness_per_s": 100.0 * workers,
        "efficiency": 1.0,
        "workers_cpu_s": cpu_ms * workers,
        "cpu_per_heartbeat_ms": cpu_ms,
        "group_stable_s": 2.0,
        "load": LOAD,
    }


FIRST = [_run(1, 0.2, kind="first"), _run(4, 0.3, kind="first")]
STEADY = [_run(1, 0.04, kind="steady"), _run(4, 0.046, kind="steady")]


def test_the_health_section_states_each_cpu_figure_beside_its_limit() -> None:
    lines = health_cost_lines(FIRST, STEADY)
    assert lines[1] == HEALTH_COST_TITLE
    header = lines.index("| figure | limit | measured | result |")
    assert lines[header + 2 : header + 5] == [
        "| monitor CPU per heartbeat that changes nothing | <= 50 µs | 40 µs at 1 worker (a core would carry "
        "25,000/s) | **met** |",
        "| monitor CPU per first heartbeat (a readiness change) | <= 250 µs | 200 µs at 1 worker | **met** |",
        "| monitor CPU per heartbeat at 4 workers | <= 1.2x of 1 | at rest 46 vs 40 µs = 1.15x; changes 300 vs "
        "200 µs = 1.50x | **missed** |",
    ]
    rest = lines.index("At rest:")
    assert lines[rest + 5] == "| 4 | 4,000 | 10.00 | 400 | 0.18 | 46 | 1.15x | 2.0 | " + LOAD + " |"
    assert lines[lines.index("Changes:") + 5] == "| 4 | 4,000 | 10.00 | 400 | 1.20 | 300 | 1.50x | 2.0 | " + LOAD + " |"


def test_the_targets_table_judges_the_monitor_cpu_limits() -> None:
    planner = {
        "cpu_ratio": 0.5,
        "ratio": 0.5,
        "raw_cpu_s": 1.0,
        "planner_cpu_s": 2.0,
        "planner_events_per_s": 1.0,
        "raw_events_per_s": 2.0,
        "clusters": 1,
        "poll_max_records": 500,
    }
    latency = {
        "planner_ms": {"p50": 1.0, "p99": 1.0},
        "raw_ms": {"p50": 1.0, "p99": 1.0},
        "ratio_p99": 1.0,
        "trials": 1,
    }
    kafka = {"planner": planner, "latency": latency, "executors": [], "rollouts": []}
    rows = verdicts({**kafka, "health": FIRST, "health_steady": STEADY})
    assert [(name, met) for name, met, _ in rows if name.startswith("monitor CPU")] == [
        ("monitor CPU per heartbeat that changes nothing <= 50 µs", True),
        ("monitor CPU per first heartbeat (a readiness change) <= 250 µs", True),
        ("monitor CPU per heartbeat at 4 workers <= 1.2x of 1", False),
    ]


def test_a_steady_run_that_measured_its_idle_cost_shows_the_figure_without_it_beside_the_judged_one() -> None:
    """The run's wall time includes faust's commit interval, while the worker idles at a fixed CPU
    cost: the figure without it is shown, the limit still judges the whole figure."""
    steady = [{**_run(1, 0.06, kind="steady"), "idle_cpu_per_s": 0.012, "net_cpu_per_heartbeat_ms": 0.048}]
    lines = health_cost_lines(FIRST, steady)
    header = lines.index("| figure | limit | measured | result |")
    assert lines[header + 2] == (
        "| monitor CPU per heartbeat that changes nothing | <= 50 µs | 60 µs at 1 worker (a core would carry "
        "16,667/s); 48 µs without its idle cost (12 ms of CPU a second idle, judged on the whole figure) | **missed** |"
    )
