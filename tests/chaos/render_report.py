"""Render the chaos test's JSON summary (`ROLLOUT_CHAOS_REPORT`) as the results table of a doc.

    python tests/chaos/render_report.py REPORT.json docs/reliability.md

Replaces what lies between `<!-- chaos-results:begin -->` and `<!-- chaos-results:end -->` (a run
on one broker and one Redis) or between `<!-- chaos-results-production:begin -->` and its end (a run
on the production topology), so each keeps its own figures; without a doc argument, prints the table.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def markers(topology: str) -> tuple[str, str]:
    """The begin and end comments of the results block of a run on `topology`."""
    block = "chaos-results" if topology == "single" else f"chaos-results-{topology}"
    return f"<!-- {block}:begin -->", f"<!-- {block}:end -->"


KINDS = {
    "planner": "planner SIGKILL + restart",
    "executor": "executor SIGKILL + restart",
    "monitor": "health monitor SIGKILL + restart",
    "reporter": "health reporter SIGKILL + restart",
    "broker": "Kafka broker restart (SIGTERM, same data dir)",
    "redis": "Redis restart (AOF, fsync always)",
    "relabel": "inventory: a cluster relabelled, same stage",
    "move": "inventory: a cluster moved to the next stage",
    "remove": "inventory: a cluster removed",
    "bad_records": "bad records (not JSON, wrong schema) on every input topic",
    "second_planner": "a second planner on the same namespace (BUS-8), kept running",
}
# The server faults of a run on the production topology, in place of the broker and Redis restarts.
PRODUCTION_KINDS = {
    "planner": KINDS["planner"],
    "executor": KINDS["executor"],
    "monitor": KINDS["monitor"],
    "reporter": KINDS["reporter"],
    "broker_loss": "Kafka: SIGKILL of the node leading most stage-advance and upgrade-results partitions",
    "controller_loss": "Kafka: SIGKILL of the active KRaft controller",
    "redis_failover": "Redis: SIGKILL of the primary, Sentinel promotes the replica",
    **{kind: KINDS[kind] for kind in ("relabel", "move", "remove", "bad_records", "second_planner")},
}
TOPOLOGIES = {
    "single": "one Kafka broker and one Redis",
    "production": "a three-node KRaft cluster (replication 3, min.insync.replicas 2) and Redis with a replica "
    "and three Sentinels (every write waits for the replica)",
}


def _short(text: str, limit: int = 220) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def render(report: dict[str, Any]) -> str:
    runs = report["runs"]
    n = len(runs)
    injected: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    for run in runs:
        kinds = [f["kind"] for f in run["faults"] if f.get("fired_at") is not None]
        injected.update(kinds)
        if run["passed"]:
            survived.update(kinds)
    completed = sum(bool(r.get("completed")) for r in runs)
    duplicates = sum(r.get("duplicates", 0) for r in runs)
    completions = sum(r.get("completions", 0) for r in runs)
    reruns = sum(r.get("reruns", 0) for r in runs)
    explained = sum(r.get("explained_reruns", 0) for r in runs)
    observed = sum(r.get("observed_before_rerun", 0) for r in runs)
    missing = sum(r.get("missing", 0) for r in runs if r["passed"])
    missing_failed = sum(r.get("missing", 0) for r in runs if not r["passed"])
    gate = sum(r.get("gate1_violations", 0) + r.get("gate3_violations", 0) + r.get("oversize_batches", 0) for r in runs)
    twice = sum(r.get("decided_twice", 0) for r in runs)
    batches = sum(r.get("batches", 0) for r in runs)
    gate_checked = sum(r.get("batches_gate_checked", 0) for r in runs)
    gate1_checks = sum(r.get("gate1_checks", 0) for r in runs)
    gate3_checks = sum(r.get("gate3_checks", 0) for r in runs)
    gate_violations = sum(r.get("gate1_violations", 0) + r.get("gate3_violations", 0) for r in runs)
    samples = sum(r.get("timeline_samples", 0) for r in runs)
    moved = sum(r.get("membership_changes", 0) for r in runs)
    bad = sum(r.get("bad_records_sent", 0) for r in runs)
    lag_p = max((r.get("lag_planner", 0) or 0 for r in runs), default=0)
    lag_e = max((r.get("lag_executors", 0) or 0 for r in runs), default=0)
    walls = [r["wall_s"] for r in runs if "wall_s" in r]
    rollouts = [r["rollout_s"] for r in runs if "rollout_s" in r]
    exits = sum(len(r.get("unexpected_exits", [])) for r in runs)
    upgrades = sum(r.get("upgrades_succeeded", 0) for r in runs)

    topology = report.get("topology", "single")
    kinds = PRODUCTION_KINDS if topology == "production" else KINDS
    lines = [
        f"Last run: {report['generated_at']} on {TOPOLOGIES[topology]}, {n} seeds, "
        f"{report['faults_per_seed']} faults per seed, "
        f"{report.get('input_faults_per_seed', 0)} input faults per seed, "
        f"{report['clusters']} clusters in {report['stages']} stages, {report['executors']} executors "
        f"(`ROLLOUT_CHAOS_SEEDS={report['seeds']} ROLLOUT_CHAOS_FAULTS={report['faults_per_seed']} "
        f"ROLLOUT_CHAOS_INPUT_FAULTS={report.get('input_faults_per_seed', 0)}"
        + ("" if topology == "single" else f" ROLLOUT_CHAOS_TOPOLOGY={topology}")
        + "`).",
        "",
        "| fault | injected | in seeds that passed |",
        "|---|---:|---:|",
    ]
    for kind, label in kinds.items():
        lines.append(f"| {label} | {injected[kind]} | {survived[kind]} |")
    lines.append(f"| **all faults** | **{sum(injected.values())}** | **{sum(survived.values())}** |")
    in_flight = [
        f for r in runs for f in r["faults"] if f.get("fired_at") is not None and f.get("in_flight") is not None
    ]
    if in_flight:
        busy = sum(bool(f["in_flight"]) for f in in_flight)
        lines += ["", f"Inventory changes aimed at a cluster upgrading right then: {busy} of {len(in_flight)}."]
    lines += [
        "",
        "| result | value |",
        "|---|---:|",
        f"| seeds passed (audit clean) | {sum(r['passed'] for r in runs)} / {n} |",
        f"| rollouts completed (every stage and track COMPLETE) | {completed} / {n} |",
        f"| cluster-track upgrades audited | {upgrades} |",
        f"| upgrades that took effect, by the simulated driver's own record | {completions} |",
        f"| duplicate upgrades (one cluster, track, version took effect twice) | {duplicates} |",
        f"| upgrades a new lease holder found done (probe) and did not run again | {observed} |",
        f"| upgrades whose driver was started again after an interruption (a second `started`) | {reruns} |",
        f"| … of which explained by an executor killed mid-upgrade | {explained} |",
        f"| cluster-tracks never upgraded: in seeds that passed / that failed | {missing} / {missing_failed} |",
        f"| clusters handed out twice by the planner | {twice} |",
        f"| batches audited / gate violations (maxNew, GATE-1, GATE-3) | {batches} / {gate} |",
        f"| batches whose partition and gates were rebuilt and checked | {gate_checked} |",
        f"| … checked against the partition's unavailable count (GATE-1) / earlier partitions (GATE-3) "
        f"| {gate1_checks} / {gate3_checks} |",
        f"| batches sent while GATE-1 or GATE-3 was closed | {gate_violations} |",
        f"| points of the rebuilt unavailable-count timelines | {samples} |",
        f"| membership changes the planner announced (SEQ-6) | {moved} |",
        f"| bad records sent / left without a dead letter | {bad} / "
        f"{sum(1 for r in runs for f in r.get('findings', []) if f.startswith('BUS-4'))} |",
        f"| services that exited by themselves | {exits} |",
        f"| consumer lag at the end, planner / executors (max over seeds) | {lag_p} / {lag_e} |",
        f"| wall time, whole run | {report['total_wall_s']:.0f} s |",
    ]
    if walls:
        lines.append(f"| wall time per seed, median / max | {statistics.median(walls):.0f} s / {max(walls):.0f} s |")
    if rollouts:
        lines.append(
            f"| release to last COMPLETE, median / max | {statistics.median(rollouts):.0f} s / {max(rollouts):.0f} s |"
        )
    failed = [r for r in runs if not r["passed"]]
    lines += ["", "Seeds that failed:" if failed else "No seed failed."]
    for run in failed:
        faults = ", ".join(
            f"{f['kind']}@{f['at_fraction']:.2f}" + (f" ({f['detail']})" if f.get("detail") else "")
            for f in run["faults"]
        )
        lines.append(
            f"- seed {run['seed']} (faults {faults}): {_short(run['findings'][0]) if run['findings'] else '?'}"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    report = json.loads(Path(argv[0]).read_text())
    table = render(report)
    if len(argv) == 1:
        print(table, end="")
        return 0
    begin, end = markers(report.get("topology", "single"))
    doc = Path(argv[1])
    text = doc.read_text()
    head, found, rest = text.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found and found_end):
        print(f"{doc}: no {begin} ... {end} block", file=sys.stderr)
        return 1
    doc.write_text(f"{head}{begin}\n{table}{end}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
