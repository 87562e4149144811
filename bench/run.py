"""Run every benchmark, print the tables and write docs/benchmarks.md with charts.

    python -m bench.run            # full: engine 1k..1M, simulator rollouts, Kafka benchmarks (~27 minutes)
    python -m bench.run --quick    # tiny sizes, seconds, no Kafka; prints only unless --output is given
    python -m bench.run --quick --kafka-bootstrap HOST:PORT --redis-url URL   # quick, with tiny Kafka runs

Full mode runs each engine size and each Kafka benchmark in its own process so the memory figures
(RSS deltas) are clean. The Kafka benchmarks (planner over Kafka, decision latency, executor
scaling, a whole rollout through the services) use the given broker and Redis, or
`KAFKA_BOOTSTRAP` / `REDIS_URL`, or else start a local broker and redis-server (`rollout_devenv`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import join_cost, kafka_report, plan_scale
from bench.charts import save_chart
from bench.engine_cost import measure_baseline, measure_engine, measure_naive_memory
from bench.kafka_report import KAFKA_FULL, KAFKA_QUICK
from bench.whole_rollout import measure_rollout
from bench.window_cost import as_json as windows_json
from bench.window_cost import fleet_lines, fleet_verdict, measure_windows
from bench.window_cost import page_lines as window_lines
from bench.window_cost import verdict as window_verdict

ROOT = Path(__file__).resolve().parent.parent
TARGET_EVENTS_PER_S = 100_000
TARGET_SCALING = 2.0
TARGET_BYTES_PER_CLUSTER = 1024
PROFILE_LINES = 60


@dataclass
class Plan:
    engine_sizes: list[int]
    events: int
    profile_events: int
    baseline_budget_s: dict[int, float]
    rollouts: list[tuple[int, int]]  # (clusters, stages)
    isolate: bool
    window_clusters: int = 0  # the fleet of the old-window benchmark; 0 skips it
    # engine sizes and (clusters, stages) rollouts rerun with every cluster on a window from 2020
    window_engine_sizes: list[int] = field(default_factory=list)
    window_rollouts: list[tuple[int, int]] = field(default_factory=list)
    # stage sizes at which one inventory join is timed, and how many joins from 1,000 members
    join_sizes: tuple[int, ...] = join_cost.STAGE_SIZES
    many_joins: int = join_cost.MANY_JOINS


FULL = Plan(
    engine_sizes=[1_000, 10_000, 100_000, 1_000_000],
    events=100_000,
    profile_events=20_000,
    baseline_budget_s={1_000: 5, 10_000: 10, 100_000: 15, 1_000_000: 20},
    rollouts=[(1_000, 5), (100_000, 5), (100_000, 3)],
    isolate=True,
    window_clusters=1_000,
    window_engine_sizes=[1_000, 10_000, 100_000, 1_000_000],
    window_rollouts=[(100_000, 3)],
)
QUICK = Plan(
    engine_sizes=[200, 1_000],
    events=2_000,
    profile_events=1_000,
    baseline_budget_s={200: 0.3, 1_000: 0.3},
    rollouts=[(200, 5), (1_000, 5), (1_000, 3)],
    isolate=False,
    window_clusters=100,
    window_engine_sizes=[200, 1_000],
    window_rollouts=[(1_000, 3)],
    join_sizes=(200, 1_000),
    many_joins=2_000,
)


def engine_run(clusters: int, plan: Plan, *, windows: bool = False) -> dict[str, Any]:
    """One engine size; the windows variant is neither profiled nor given a baseline."""
    profile = plan.profile_events if clusters == max(plan.engine_sizes) and not windows else 0
    budget = 0.0 if windows else plan.baseline_budget_s.get(clusters, 0.0)
    if plan.isolate:
        cmd = [
            sys.executable,
            "-m",
            "bench.engine_cost",
            "--clusters",
            str(clusters),
            "--events",
            str(plan.events),
            "--profile-events",
            str(profile),
            "--baseline-events",
            str(plan.events if budget else 0),
            "--baseline-budget",
            str(budget),
            "--json",
            *(["--windows"] if windows else []),
        ]
        done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
        out: dict[str, Any] = dict(json.loads(done.stdout))
        if budget:
            memory = [sys.executable, "-m", "bench.engine_cost", "--clusters", str(clusters), "--naive-memory"]
            done = subprocess.run(memory, cwd=ROOT, check=True, capture_output=True, text=True)
            out["baseline"]["bytes_per_cluster"] = json.loads(done.stdout)["bytes_per_cluster"]
        return out
    out = {"engine": asdict(measure_engine(clusters, plan.events, profile_events=profile, windows=windows))}
    if budget:
        out["baseline"] = asdict(measure_baseline(clusters, plan.events, budget_s=budget))
        out["baseline"]["bytes_per_cluster"] = measure_naive_memory(clusters)  # quick mode: same process, rough
    return out


def rollout_run(clusters: int, stages: int, plan: Plan, *, windows: bool = False) -> dict[str, Any]:
    if plan.isolate:
        cmd = [
            sys.executable,
            "-m",
            "bench.whole_rollout",
            "--clusters",
            str(clusters),
            "--stages",
            str(stages),
            "--json",
            *(["--windows"] if windows else []),
        ]
        done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
        return dict(json.loads(done.stdout))
    return asdict(measure_rollout(clusters, stages, windows=windows))


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def collect(
    plan: Plan,
    log: Any = sys.stderr,
    *,
    kafka: kafka_report.KafkaPlan | None = None,
    bootstrap: str | None = None,
    redis_url: str | None = None,
) -> dict[str, Any]:
    load_before = load_average()
    engine = []
    for size in plan.engine_sizes:
        print(f"engine: {size} clusters ...", file=log, flush=True)
        engine.append(engine_run(size, plan))
    rollouts = []
    for clusters, stages in plan.rollouts:
        print(f"whole rollout: {clusters} clusters, {stages} stages ...", file=log, flush=True)
        rollouts.append(rollout_run(clusters, stages, plan))
    out: dict[str, Any] = {"engine": engine, "rollouts": rollouts}
    if plan.window_engine_sizes or plan.window_rollouts:
        out["engine_windows"] = []
        for size in plan.window_engine_sizes:
            print(f"engine, every cluster on a window from 2020: {size} clusters ...", file=log, flush=True)
            out["engine_windows"].append(engine_run(size, plan, windows=True))
        out["rollout_windows"] = []
        for clusters, stages in plan.window_rollouts:
            print(f"whole rollout with windows: {clusters} clusters, {stages} stages ...", file=log, flush=True)
            out["rollout_windows"].append(rollout_run(clusters, stages, plan, windows=True))
    out["plan_scale"] = plan_scale.collect(plan.engine_sizes, isolate=plan.isolate, log=log)
    print(f"inventory joins during a rollout: {plan.join_sizes} members, {plan.many_joins} joins ...", file=log)
    out["joins"] = join_cost.collect(plan.join_sizes, many=plan.many_joins, isolate=plan.isolate)
    if plan.window_clusters:
        print(f"windows from years back: {plan.window_clusters} clusters ...", file=log, flush=True)
        out["windows"] = windows_json(measure_windows(plan.window_clusters))
    if kafka is not None:
        from bench.kafka_common import infrastructure

        with infrastructure(bootstrap, redis_url) as infra:
            out["kafka"] = kafka_report.collect(kafka, infra.bootstrap, infra.redis_url, isolate=plan.isolate, log=log)
            out["kafka"]["infrastructure"] = infra.origin
    info = machine()
    info["load"] = f"{load_before} before, {load_average()} after (1/5/15-minute load averages)"
    return {"machine": info, **out}


def machine() -> dict[str, str]:
    cpu = "unknown CPU"
    cores = os.cpu_count() or 0
    try:
        info = Path("/proc/cpuinfo").read_text()
        models = [line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")]
        if models:
            cpu = models[0]
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": str(cores),
        "memory": memory,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.platform(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# ---------------------------------------------------------------- tables and verdicts


def engine_table(results: list[dict[str, Any]]) -> list[str]:
    rows = [
        "| clusters | regime | events/s (best chunk) | events/s (whole, wall) | events/s (CPU time) | "
        "mean µs (best chunk) | p50 µs | p99 µs | max µs | commands out |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        engine = res["engine"]
        for st in engine["streams"].values():
            rows.append(
                f"| {engine['clusters']:,} | {st['regime']} (~{st['pool']:,} flipped) | "
                f"{st['best_events_per_s']:,.0f} | {st['events_per_s']:,.0f} | {st['cpu_events_per_s']:,.0f} | "
                f"{st['best_mean_us']:.1f} | {st['p50_us']:.1f} | {st['p99_us']:.1f} | {st['max_us']:,.0f} | "
                f"{st['commands']:,} |"
            )
    return rows


def setup_table(results: list[dict[str, Any]]) -> list[str]:
    rows = [
        "| clusters | new_state s | release s | plan total s | setup feed s | planner B/cluster | "
        "inventory B/cluster | partition 0 unavailable / max |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        e = res["engine"]
        rows.append(
            f"| {e['clusters']:,} | {e['new_state_s']:.3f} | {e['release_s']:.3f} | {e['plan_s']:.3f} | "
            f"{e['setup_feed_s']:.3f} | {e['planner_bytes_per_cluster']:,.0f} | "
            f"{e['inventory_bytes_per_cluster']:,.0f} | {e['partition0_unavailable']:,} / "
            f"{e['partition0_max_unavailable']:,} |"
        )
    return rows


def baseline_table(results: list[dict[str, Any]]) -> list[str]:
    rows = [
        "| clusters | naive events measured | naive events/s | naive mean µs | engine events/s (at-gate) | speed-up |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for res in results:
        base = res.get("baseline")
        if base is None:
            continue
        engine = res["engine"]["streams"]["at-gate"]["best_events_per_s"]
        rows.append(
            f"| {base['clusters']:,} | {base['events']:,} | {base['events_per_s']:,.1f} | "
            f"{base['mean_us']:,.0f} | {engine:,.0f} | {engine / base['events_per_s']:,.0f}x |"
        )
    return rows


def rollout_table(rollouts: list[dict[str, Any]]) -> list[str]:
    rows = [
        "| clusters | stages | wall s | CPU s | of which setup s | in decide s | decisions | µs/decision | "
        "events | µs/event | batches | simulated days | complete |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rollouts:
        rows.append(
            f"| {r['clusters']:,} | {r['stages']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
            f"{r['setup_s']:.2f} | {r['decide_s']:.2f} | {r['decisions']:,} | {r['us_per_decision']:,.0f} | "
            f"{r['events']:,} | {r['us_per_event']:.2f} | {r['batches']:,} | {r['simulated_days']:.2f} | "
            f"{'yes' if r['complete'] else 'NO'} |"
        )
    return rows


@dataclass
class Verdict:
    name: str
    met: bool
    detail: str


def verdicts(data: dict[str, Any]) -> list[Verdict]:
    engines = {r["engine"]["clusters"]: r["engine"] for r in data["engine"]}
    small, large = engines[min(engines)], engines[max(engines)]
    size = f"{large['clusters']:,}"
    out = []
    rates = {k: s["best_events_per_s"] for k, s in large["streams"].items()}
    cpu_rates = {k: s["cpu_events_per_s"] for k, s in large["streams"].items()}
    out.append(
        Verdict(
            f"engine >= {TARGET_EVENTS_PER_S:,} events/s at {size} clusters",
            all(v >= TARGET_EVENTS_PER_S for v in rates.values()),
            ", ".join(f"{k}: {v:,.0f} events/s" for k, v in rates.items())
            + " (per CPU second: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in cpu_rates.items())
            + ")",
        )
    )
    ratios = {k: s["best_mean_us"] / small["streams"][k]["best_mean_us"] for k, s in large["streams"].items()}
    out.append(
        Verdict(
            f"time per event at {size} within {TARGET_SCALING:g}x of {small['clusters']:,}",
            all(v <= TARGET_SCALING for v in ratios.values()),
            ", ".join(
                f"{k}: {large['streams'][k]['best_mean_us']:.1f} µs vs "
                f"{small['streams'][k]['best_mean_us']:.1f} µs = {v:.2f}x"
                for k, v in ratios.items()
            )
            # wall-clock chunks move with the machine's load; CPU time per event does not
            + " (CPU time per event: "
            + ", ".join(
                f"{k} {small['streams'][k]['cpu_events_per_s'] / s['cpu_events_per_s']:.2f}x"
                for k, s in large["streams"].items()
            )
            + ")",
        )
    )
    per = large["planner_bytes_per_cluster"]
    out.append(
        Verdict(
            f"planner memory <= {TARGET_BYTES_PER_CLUSTER:,} B per cluster",
            per <= TARGET_BYTES_PER_CLUSTER,
            f"{per:,.0f} B/cluster at {size} (RSS growth over new_state + release + mid-rollout; the "
            f"inventory's Cluster models it is built from, {large['inventory_bytes_per_cluster']:,.0f} B/cluster, "
            "are not kept: see the million-cluster plan for the figure with everything included)",
        )
    )
    if "plan_scale" in data:
        out += [Verdict(name, met, detail) for name, met, detail in plan_scale.verdicts(data["plan_scale"])]
    if "joins" in data:
        out += [Verdict(name, met, detail) for name, met, detail in join_cost.verdicts(data["joins"])]
    if "windows" in data:
        out.append(Verdict(*window_verdict(data["windows"])))
    if data.get("engine_windows"):
        out.append(Verdict(*_fleet_windows(fleet_verdict, data)))
    if "kafka" in data:
        out += [Verdict(name, met, detail) for name, met, detail in kafka_report.verdicts(data["kafka"])]
    return out


def _fleet_windows(render: Any, data: dict[str, Any]) -> Any:
    return render(data["engine"], data["engine_windows"], data["rollouts"], data.get("rollout_windows", []))


def print_tables(data: dict[str, Any]) -> None:
    for title, rows in (
        ("Engine: readiness events through decide", engine_table(data["engine"])),
        ("Engine: plan time and memory", setup_table(data["engine"])),
        ("Naive baseline", baseline_table(data["engine"])),
        ("Whole rollouts in the simulator", rollout_table(data["rollouts"])),
    ):
        print(f"\n## {title}")
        print("\n".join(rows))
    print()
    for v in verdicts(data):
        print(f"{'MET   ' if v.met else 'MISSED'} {v.name}: {v.detail}")


# ---------------------------------------------------------------- charts and the page


def charts(data: dict[str, Any], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [r["engine"] for r in data["engine"]]
    sizes = [e["clusters"] for e in engines]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(
            sizes,
            [e["streams"][regime]["best_events_per_s"] for e in engines],
            marker=marker,
            label=f"engine, {regime}",
        )
    base = [r["baseline"] for r in data["engine"] if "baseline" in r]
    if base:
        ax.plot(
            [b["clusters"] for b in base],
            [b["events_per_s"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: re-partition + full scan per event",
        )
    ax.axhline(TARGET_EVENTS_PER_S, color="grey", linestyle=":", label=f"target {TARGET_EVENTS_PER_S:,}/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("readiness events per second")
    ax.set_title("decide() throughput, one readiness event per call")
    save_chart(fig, ax, folder / "bench-engine.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(sizes, [e["streams"][regime]["best_mean_us"] for e in engines], marker=marker, label=f"{regime} mean")
        ax.plot(
            sizes,
            [e["streams"][regime]["p99_us"] for e in engines],
            marker=marker,
            linestyle="--",
            label=f"{regime} p99",
        )
    ax.set_xscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("µs per event")
    ax.set_ylim(bottom=0)
    ax.set_title("Time per readiness event")
    save_chart(fig, ax, folder / "bench-latency.png")
    images = ["bench-engine.png", "bench-latency.png", *scaling_charts(data, folder)]
    if "kafka" in data:
        images += kafka_report.charts(data["kafka"], folder)
    return images


SCALING_TIME = "bench-scaling-time.svg"
SCALING_MEMORY = "bench-scaling-memory.svg"


def scaling_charts(data: dict[str, Any], folder: Path) -> list[str]:
    """Time per event and memory per cluster against the fleet size, the naive baseline beside them."""
    import matplotlib.pyplot as plt

    engines = [r["engine"] for r in data["engine"]]
    sizes = [e["clusters"] for e in engines]
    base = [r["baseline"] for r in data["engine"] if "baseline" in r]
    windowed = [r["engine"] for r in data.get("engine_windows", [])]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(
            sizes, [e["streams"][regime]["best_mean_us"] for e in engines], marker=marker, label=f"engine, {regime}"
        )
    if windowed:
        ax.plot(
            [e["clusters"] for e in windowed],
            [e["streams"]["at-gate"]["best_mean_us"] for e in windowed],
            marker="^",
            linestyle="-.",
            label="engine, at-gate, every cluster on a window from 2020",
        )
    if base:
        ax.plot(
            [b["clusters"] for b in base],
            [b["mean_us"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: re-partition + full scan per event",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("µs per readiness event (fastest chunk's mean)")
    ax.set_title("Time per event: engine vs full recompute")
    names = [save_chart(fig, ax, folder / SCALING_TIME)]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes, [e["planner_bytes_per_cluster"] for e in engines], marker="o", label="engine records")
    ax.plot(
        sizes,
        [e["planner_bytes_per_cluster"] + e["inventory_bytes_per_cluster"] for e in engines],
        marker="s",
        label="engine records + inventory models",
    )
    if base and all("bytes_per_cluster" in b for b in base):
        ax.plot(
            [b["clusters"] for b in base],
            [b["bytes_per_cluster"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: inventory models + readiness map",
        )
    ax.axhline(TARGET_BYTES_PER_CLUSTER, color="grey", linestyle=":", label=f"target {TARGET_BYTES_PER_CLUSTER:,} B")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("bytes per cluster (RSS growth)")
    ax.set_title("Memory per cluster")
    names.append(save_chart(fig, ax, folder / SCALING_MEMORY))
    return names


def scaling_lines(data: dict[str, Any], images: list[str]) -> list[str]:
    if SCALING_TIME not in images:
        return []
    base = {r["engine"]["clusters"]: r.get("baseline") for r in data["engine"]}
    rows = [
        "### Scaling shape: time per event and memory per cluster",
        "",
        "The same runs as the tables above, against the fleet size. The naive baseline recomputes the",
        "partitions and scans the fleet per event; its memory is what it keeps between events (the",
        "inventory's `Cluster` models and a readiness map), measured as RSS growth in the same process.",
        "",
        f"![time per event vs clusters]({SCALING_TIME})",
        "",
        f"![memory per cluster vs clusters]({SCALING_MEMORY})",
        "",
        "| clusters | engine µs/event (at-gate) | naive µs/event | engine B/cluster | engine + inventory B/cluster "
        "| naive B/cluster |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for res in data["engine"]:
        e = res["engine"]
        b = base.get(e["clusters"])
        naive_us = f"{b['mean_us']:,.0f}" if b else "-"
        naive_bytes = f"{b['bytes_per_cluster']:,.0f}" if b and "bytes_per_cluster" in b else "-"
        rows.append(
            f"| {e['clusters']:,} | {e['streams']['at-gate']['best_mean_us']:.1f} | {naive_us} | "
            f"{e['planner_bytes_per_cluster']:,.0f} | "
            f"{e['planner_bytes_per_cluster'] + e['inventory_bytes_per_cluster']:,.0f} | {naive_bytes} |"
        )
    return [*rows, ""]


def _profile_section(engine: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for regime, prof in engine.get("profile", {}).items():
        lines += [
            f"### {regime} regime at {engine['clusters']:,} clusters ({prof['events']:,} events)",
            "",
            "cProfile, functions by self time, as a share of the time inside `decide`:",
            "",
            "| self % | cumulative % | calls | function |",
            "|---:|---:|---:|---|",
        ]
        for row in prof["top_self"][:15]:
            lines.append(
                f"| {row['self_share'] * 100:.1f} | {row['cum_share'] * 100:.1f} | {row['calls']:,} | "
                f"`{row['function']}` |"
            )
        # pyinstrument names the profiling script by its absolute path: not for the page
        kept = [line for line in prof["pyinstrument"].strip("\n").splitlines() if not line.startswith("Profile at")]
        tree = "\n".join(kept[:PROFILE_LINES])
        lines += ["", "pyinstrument call tree (top):", "", "```text", tree, "```", ""]
    return lines


def page(data: dict[str, Any], images: list[str], quick: bool) -> str:
    m = data["machine"]
    engines = {r["engine"]["clusters"]: r["engine"] for r in data["engine"]}
    large = engines[max(engines)]
    verdict_list = verdicts(data)
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m bench.run`)"
        + (" in **quick mode (tiny sizes)**" if quick else "")
        + f" on {m['date']}. Re-run it to refresh this page; the figures below are what was measured,",
        "nothing is extrapolated.",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory']} RAM ({m['os']})",
        f"- Python {m['python']} ({m['implementation']}), one process, one thread",
        f"- Load: {m.get('load', 'unknown')}. The machine was shared with other work (Kafka, test suites), so",
        "  wall-clock figures carry noise: throughput is judged on the fastest of 5 equal chunks of each",
        "  stream (timeit's best-of-N convention); whole-stream wall and CPU-time rates are shown beside it.",
        "",
        "## Targets",
        "",
        "| target | result | measured |",
        "|---|---|---|",
    ]
    for v in verdict_list:
        lines.append(f"| {v.name} | {'**met**' if v.met else '**missed**'} | {v.detail} |")
    lines += [
        "",
        "## Engine: readiness events through `decide`",
        "",
        "One stage, 4 automatic partitions (autoPartitionSize 25%, threshold 100), maxUnavailable 10%, maxNew 50,",
        "maxUnavailablePartitions 0. Setup: build the state (`new_state`), publish a release (the engine hands",
        "out batches in partition 0 up to its maxUnavailable), report half of the handed-out control planes",
        "upgraded and half of those ready (more batches go out, node upgrades start). Then a seeded stream of",
        "`Readiness` flips on random clusters, each its own `decide` call, is timed (GC disabled during the",
        "stream). Two regimes over the same state:",
        "",
        "- **at-gate**: about 64 clusters flipped not ready at any time, so partition 0 sits just above its",
        "  maxUnavailable (within maxNew of it): every event that loosens a count (a `ready` flip) makes the",
        "  dispatcher try a batch and refuse it (since 8ea870a from counters, in O(1)). This is the steady",
        "  state of a real gated rollout, where the engine keeps each partition filled up to its limit.",
        "- **spread**: about 1% of the fleet flipped; at 100k+ clusters partition 0 is then more than maxNew",
        "  above its limit and the gate is refused in O(1). (At 1k, 1% is 10 clusters: still at the gate.)",
        "",
        f"![events/s vs clusters]({images[0]})",
        "",
        *engine_table(data["engine"]),
        "",
        f"![time per event]({images[1]})",
        "",
        "### Plan computation and memory",
        "",
        "`plan total` = `new_state` (stage membership, partitions, per-cluster records) + the release decision",
        "(targets for every member, first batches). Memory is the growth of the process RSS over building",
        "the engine state and reaching mid-rollout, divided by the clusters; the inventory's own pydantic",
        "`Cluster` models (which `ClusterRec.spec` keeps) are shown separately.",
        "",
        *setup_table(data["engine"]),
        "",
        "Where a pending cluster's record goes (shallow `sys.getsizeof`, bytes):",
        "",
        "| part | bytes |",
        "|---|---:|",
        *[f"| {k} | {v:,} |" for k, v in large["record_breakdown"].items()],
        "",
        *scaling_lines(data, images),
        *kafka_report.before_after_lines(data["engine"]),
        "## Naive baseline",
        "",
        "What Fleet does per event: recompute the partitions from the inventory (`plan_partitions`) and scan",
        "every cluster to count the not-ready ones per partition. Run with a time budget per size (at least 3",
        "events), same process as the engine run; only what was measured is shown.",
        "",
        *baseline_table(data["engine"]),
        "",
        "## Whole rollouts in the embedded simulator",
        "",
        "Default rolloutStrategy (maxUnavailable 100%, autoPartitionSize 25%, maxNew 50), upgrades 10m",
        "(control plane) / 30m (nodes), soak 1d per stage, stages of 1/4/15/30/50% (5 stages) or 5/25/70%",
        "(3 stages) of the fleet. Wall and CPU time cover the whole `Simulator`: building the fleet and the",
        "plan report, the simulated world and the report; `in decide` is the engine's share. A decision is",
        "one simulated instant (an `EventBatch` of everything that happened then), so with maxUnavailable",
        "100% the number of decisions does not grow with the fleet and each decision carries more events:",
        "compare µs/event between sizes.",
        "",
        *rollout_table(data["rollouts"]),
        "",
        *(window_lines(data["windows"]) if "windows" in data else []),
        *(_fleet_windows(fleet_lines, data) if data.get("engine_windows") else []),
        *([*plan_scale.section(data["plan_scale"]), ""] if "plan_scale" in data else []),
        *([*join_cost.section(data["joins"]), ""] if "joins" in data else []),
    ]
    if "kafka" in data:
        lines += kafka_report.page_lines(data["kafka"], images)
    engine_missed = [v for v in verdict_list[:3] if not v.met]
    kafka_limits = kafka_report.limits_lines(data["kafka"]) if "kafka" in data else []
    if engine_missed or kafka_limits:
        lines += ["## Missed targets: where the time and memory go", ""]
    if engine_missed:
        lines += ["### Engine", "", *_limits(data), "", *_profile_section(large)]
    lines += kafka_limits
    three = [r for r in data["rollouts"] if r["stages"] == 3]
    if three:
        r = max(three, key=lambda x: x["clusters"])
        lines += [
            "## Closing note",
            "",
            f"A 3-stage rollout of {r['clusters']:,} clusters simulates in {r['wall_s']:.1f} s wall "
            f"({r['cpu_s']:.1f} s CPU, {r['decide_s']:.1f} s of it in the engine) for "
            f"{r['simulated_days']:.1f} simulated days.",
            "",
        ]
    return "\n".join(lines)


def _limits(data: dict[str, Any]) -> list[str]:
    engines = {r["engine"]["clusters"]: r["engine"] for r in data["engine"]}
    large = engines[max(engines)]
    out = []
    for regime, prof in large.get("profile", {}).items():
        top = prof["top_self"][:4]
        names = ", ".join(
            f"`{r['function'].split(':')[0].rsplit('/', 1)[-1]}:{r['function'].split('(')[-1][:-1]}` "
            f"{r['self_share'] * 100:.0f}%"
            for r in top
        )
        out.append(f"- **{regime}**: top self time: {names}.")
    out += [
        "- The engine's profile follows (cProfile by self time, then pyinstrument's tree); figures above",
        "  are after the O(1) GATE-1 refusal and the shared per-track pairs (see before/after).",
        f"- Memory: the record breakdown above; {large['planner_bytes_per_cluster']:,.0f} B/cluster of RSS growth "
        f"at {large['clusters']:,} clusters.",
    ]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="the page to write (full mode default: docs/benchmarks.md; quick mode: none)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also save the raw figures here")
    parser.add_argument("--from-json", type=Path, default=None, help="re-render from figures saved by --json")
    parser.add_argument("--kafka-bootstrap", default=None, help="a broker for the Kafka benchmarks")
    parser.add_argument("--redis-url", default=None, help="a Redis for the Kafka benchmarks")
    parser.add_argument("--no-kafka", action="store_true", help="skip the Kafka benchmarks")
    parser.add_argument(
        "--reuse-engine-json",
        type=Path,
        default=None,
        help="take the engine and simulator figures from this --json file and run only the Kafka benchmarks",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    output = args.output if args.output is not None else (None if args.quick else ROOT / "docs" / "benchmarks.md")
    # Quick mode runs the Kafka benchmarks (tiny) only against a broker and Redis it is given.
    given = bool(args.kafka_bootstrap and args.redis_url)
    kafka = None if args.no_kafka else (KAFKA_QUICK if args.quick else KAFKA_FULL)
    if args.quick and not given:
        kafka = None
    if args.from_json is not None:
        data = json.loads(args.from_json.read_text())
    elif args.reuse_engine_json is not None:
        data = json.loads(args.reuse_engine_json.read_text())
        data.pop("kafka", None)
        if kafka is not None:
            fresh = collect(
                Plan([], 0, 0, {}, [], plan.isolate),
                kafka=kafka,
                bootstrap=args.kafka_bootstrap,
                redis_url=args.redis_url,
            )
            data["kafka"] = fresh["kafka"]
            data["kafka"]["run"] = f"{fresh['machine']['date']}, load {fresh['machine']['load']}"
    else:
        data = collect(plan, kafka=kafka, bootstrap=args.kafka_bootstrap, redis_url=args.redis_url)
    print_tables(data)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=1))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        images = charts(data, output.parent)
        output.write_text(page(data, images, args.quick))
        print(f"wrote {output} and {', '.join(images)}")


if __name__ == "__main__":
    main()
