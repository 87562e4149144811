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

from bench import join_cost, kafka_report, plan_scale, soak_health
from bench.engine_charts import charts
from bench.engine_cost import measure_baseline, measure_engine, measure_naive_memory
from bench.engine_tables import (
    print_tables,
)
from bench.kafka_report import KAFKA_FULL, KAFKA_QUICK
from bench.page import page
from bench.whole_rollout import measure_rollout
from bench.window_cost import as_json as windows_json
from bench.window_cost import measure_windows

ROOT = Path(__file__).resolve().parent.parent


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
        rendered = page(data, images, args.quick)
        # the sustained health run is not part of `make bench`; the page keeps its last figures
        output.write_text(soak_health.carry_over(output.read_text(), rendered) if output.exists() else rendered)
        print(f"wrote {output} and {', '.join(images)}")


if __name__ == "__main__":
    main()
