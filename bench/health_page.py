"""The page section of the monitor's CPU per heartbeat, at rest and per change, each beside its limit.

`bench.run` measures both kinds with `bench.health_scaling` (`--kind steady`: heartbeats that change
nothing; `--kind first`: each heartbeat a cluster's first, a readiness change) at 1, 2 and 4 workers;
on a shared 2-core machine the judge is CPU per heartbeat, not wall time.
"""

from __future__ import annotations

from typing import Any

HEALTH_COST_TITLE = "## Health monitor: CPU per heartbeat at rest and per change"
LIMIT_AT_REST_US = 50.0
LIMIT_CHANGE_US = 250.0
LIMIT_SPREAD = 1.2  # CPU per heartbeat at 4 workers against 1
SPREAD_AT = 4


def _us(run: dict[str, Any]) -> float:
    return float(run["cpu_per_heartbeat_ms"]) * 1000


def _net_of_idle(run: dict[str, Any]) -> str:
    """The figure without the worker's fixed cost while idle, when the run measured it."""
    net = float(run.get("net_cpu_per_heartbeat_ms", float("nan"))) * 1000
    if net != net:  # not measured (NaN)
        return ""
    idle_ms = float(run.get("idle_cpu_per_s", 0.0)) * 1000
    return f"; {net:,.0f} µs without its idle cost ({idle_ms:.0f} ms of CPU a second idle, judged on the whole figure)"


def _by_workers(runs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {int(r["workers"]): r for r in runs}


def cost_verdicts(first: list[dict[str, Any]], steady: list[dict[str, Any]]) -> list[tuple[str, bool, str]]:
    """(figure with its limit, met, measured) for each limit the runs can judge."""
    out: list[tuple[str, bool, str]] = []
    rest, change = _by_workers(steady), _by_workers(first)
    if 1 in rest:
        us = _us(rest[1])
        out.append(
            (
                f"monitor CPU per heartbeat that changes nothing <= {LIMIT_AT_REST_US:g} µs",
                us <= LIMIT_AT_REST_US,
                f"{us:,.0f} µs at 1 worker (a core would carry {1e6 / us:,.0f}/s){_net_of_idle(rest[1])}",
            )
        )
    if 1 in change:
        us = _us(change[1])
        out.append(
            (
                f"monitor CPU per first heartbeat (a readiness change) <= {LIMIT_CHANGE_US:g} µs",
                us <= LIMIT_CHANGE_US,
                f"{us:,.0f} µs at 1 worker",
            )
        )
    out += _spread_verdict(rest, change)
    return out


def _spread_verdict(rest: dict[int, dict[str, Any]], change: dict[int, dict[str, Any]]) -> list[tuple[str, bool, str]]:
    spreads = [
        (name, _us(runs[SPREAD_AT]) / _us(runs[1]), runs)
        for name, runs in (("at rest", rest), ("changes", change))
        if 1 in runs and SPREAD_AT in runs
    ]
    if not spreads:
        return []
    measured = "; ".join(
        f"{name} {_us(runs[SPREAD_AT]):,.0f} vs {_us(runs[1]):,.0f} µs = {ratio:.2f}x" for name, ratio, runs in spreads
    )
    met = all(ratio <= LIMIT_SPREAD for _, ratio, _ in spreads)
    return [(f"monitor CPU per heartbeat at {SPREAD_AT} workers <= {LIMIT_SPREAD:g}x of 1", met, measured)]


def _table(runs: list[dict[str, Any]], *, rate: str) -> list[str]:
    base = _by_workers(runs).get(1)
    lines = [
        f"| workers | heartbeats | wall s | {rate} (wall) | workers' CPU s | CPU µs per heartbeat | vs 1 worker | "
        "group join s | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(runs, key=lambda x: x["workers"]):
        versus = f"{_us(r) / _us(base):.2f}x" if base else "-"
        lines.append(
            f"| {r['workers']} | {r['heartbeats']:,} | {r['wall_s']:.2f} | {r['readiness_per_s']:,.0f} | "
            f"{r['workers_cpu_s']:.2f} | {_us(r):,.0f} | {versus} | {r['group_stable_s']:.1f} | {r['load']} |"
        )
    return lines


def health_cost_lines(first: list[dict[str, Any]], steady: list[dict[str, Any]]) -> list[str]:
    if not first and not steady:
        return []
    lines = [
        "",
        HEALTH_COST_TITLE,
        "",
        "**At rest** (`python -m bench.health_scaling --kind steady`): the clusters' first heartbeats are",
        "turned into readiness before the clock starts; then more heartbeats of each, observed 30 s apart",
        "and saying what the first said, are produced, and the run ends when the group has committed them",
        "all. **Changes** (`--kind first`): every heartbeat is a cluster's first, so each is published as",
        "readiness and writes its row. CPU seconds are the workers' (from /proc), each figure beside its",
        "limit from the same run.",
        "",
        "| figure | limit | measured | result |",
        "|---|---|---|---|",
    ]
    for figure, met, measured in cost_verdicts(first, steady):
        name, _, limit = figure.rpartition(" <= ")
        lines.append(f"| {name} | <= {limit} | {measured} | **{'met' if met else 'missed'}** |")
    if steady:
        lines += ["", "At rest:", "", *_table(steady, rate="heartbeats/s")]
    if first:
        lines += ["", "Changes:", "", *_table(first, rate="readiness/s")]
    return lines


__all__ = ["HEALTH_COST_TITLE", "cost_verdicts", "health_cost_lines"]
