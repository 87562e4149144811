"""The engine's before/after-optimisation table, from the figures kept in
`bench/figures-before-optimisation.json` (the page as generated before the optimisations).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BEFORE = Path(__file__).resolve().parent / "figures-before-optimisation.json"


def before_after_lines(engine_results: list[dict[str, Any]]) -> list[str]:
    if not BEFORE.exists():
        return []
    before = json.loads(BEFORE.read_text())
    old = {(r["clusters"], r["regime"]): r for r in before["engine"]}
    old_mem = {r["clusters"]: r for r in before["setup"]}
    lines = [
        "## Engine before/after optimisation",
        "",
        f"Before: {before['source']}; machine then: {before['machine']}. After: this run. What changed:",
        "",
        "- **O(1) GATE-1 refusal** (8ea870a): each partition keeps a count of queued clusters that are",
        "  themselves unavailable, so a batch that would breach maxUnavailable is refused from counters",
        "  instead of popping maxNew clusters off the heap, checking each and pushing them back.",
        "- **Shared immutable per-track pairs** (d0b96d1): the rarely written per-track fields of a",
        "  cluster record point at one shared immutable pair until first written, instead of ten fresh",
        "  2-lists and two empty sets per cluster.",
        "- **Compact cluster records**: a record keeps its name and version pair; labels, channel, groups,",
        "  window, exclusions and API usage sit in a profile shared by every cluster with the same values",
        "  (selectors evaluated once per profile), and a release retargets the first cluster of each kind",
        "  and copies the effects to the alike ones. The inventory's models are not kept.",
        "",
        "Both runs are on a shared 2-core machine, and this one under more load (see the load averages",
        "at the top against the ones above): compare the best-chunk and CPU-time columns. p99, and the",
        "plan times at 1M clusters (one long run each, no best-of), move with the load more than with",
        "the code.",
        "",
        "| clusters | regime | events/s before | events/s after | x | CPU-time events/s before | after | "
        "mean µs before | after | p99 µs before | after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in engine_results:
        engine = res["engine"]
        for regime, st in engine["streams"].items():
            b = old.get((engine["clusters"], regime))
            if b is None:
                continue
            lines.append(
                f"| {engine['clusters']:,} | {regime} | {b['best_events_per_s']:,.0f} | "
                f"{st['best_events_per_s']:,.0f} | {st['best_events_per_s'] / b['best_events_per_s']:.2f} | "
                f"{b['cpu_events_per_s']:,.0f} | {st['cpu_events_per_s']:,.0f} | {b['best_mean_us']:.1f} | "
                f"{st['best_mean_us']:.1f} | {b['p99_us']:.1f} | {st['p99_us']:.1f} |"
            )
    lines += [
        "",
        "| clusters | planner B/cluster before | after | plan total s before | after |",
        "|---:|---:|---:|---:|---:|",
    ]
    for res in engine_results:
        engine = res["engine"]
        b = old_mem.get(engine["clusters"])
        if b is None:
            continue
        lines.append(
            f"| {engine['clusters']:,} | {b['planner_bytes_per_cluster']:,} | "
            f"{engine['planner_bytes_per_cluster']:,.0f} | {b['plan_s']:.3f} | {engine['plan_s']:.3f} |"
        )
    lines.append("")
    return lines


__all__ = ["BEFORE", "before_after_lines"]
