"""The Kafka benchmarks in `bench.run`: what each run measures and running them.

Their targets are in `bench.kafka_targets`, their charts in `bench.kafka_charts`, their page
sections in `bench.kafka_page` and `bench.kafka_limits`; the names `bench.run` and `bench.splice`
use are importable from here too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.before_after import before_after_lines
from bench.kafka_charts import charts
from bench.kafka_limits import limits_lines
from bench.kafka_page import HEALTH_TITLE, health_lines, page_lines
from bench.kafka_targets import (
    verdicts,
)

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class KafkaPlan:
    planner_clusters: int
    planner_events: int
    planner_profile: bool
    planner_alt_max_records: int | None  # a second run with larger polls (a setting, not a code change)
    latency_trials: int
    executors: list[int]
    per_executor: int
    rollout_clusters: list[int]
    rollout_timeout_s: float
    health_workers: list[int] = field(default_factory=list)
    health_per_worker: int = 0
    health_rounds: int = 8  # heartbeats per cluster after its first, at rest


KAFKA_FULL = KafkaPlan(
    planner_clusters=10_000,
    planner_events=20_000,
    planner_profile=True,
    planner_alt_max_records=5_000,
    latency_trials=1_000,
    executors=[1, 2, 4, 8],
    per_executor=250,
    rollout_clusters=[10_000],
    rollout_timeout_s=240.0,
    health_workers=[1, 2, 4],
    health_per_worker=2_000,
)
KAFKA_QUICK = KafkaPlan(
    planner_clusters=200,
    planner_events=200,
    planner_profile=False,
    planner_alt_max_records=None,
    latency_trials=5,
    executors=[1, 2],
    per_executor=10,
    rollout_clusters=[60],
    rollout_timeout_s=60.0,
    health_workers=[1, 2],
    health_per_worker=20,
)


def _subprocess_json(module: str, args: list[str]) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", module, *args, "--json"], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def collect(plan: KafkaPlan, bootstrap: str, redis_url: str, *, isolate: bool, log: Any = sys.stderr) -> dict[str, Any]:
    """Each benchmark in its own process (isolate) or in this one, against the given broker and Redis."""
    infra = ["--bootstrap", bootstrap, "--redis-url", redis_url]
    out: dict[str, Any] = {}
    print(
        f"planner over Kafka: {plan.planner_clusters} clusters, {plan.planner_events} events ...", file=log, flush=True
    )

    def planner(*, max_records: int | None, profile: bool) -> Any:
        """One planner-over-Kafka measurement, isolated or in this process; `max_records` None:
        the planner's default."""
        if isolate:
            args = ["--clusters", str(plan.planner_clusters), "--events", str(plan.planner_events), *infra]
            args += ["--max-records", str(max_records)] if max_records else []
            return _subprocess_json("bench.kafka_planner", args + (["--profile"] if profile else []))
        from bench import kafka_planner

        result = kafka_planner.measure(
            plan.planner_clusters,
            plan.planner_events,
            bootstrap=bootstrap,
            redis_url=redis_url,
            profile=profile,
            max_records=max_records or kafka_planner.POLL_MAX_RECORDS,
        )
        return asdict(result)

    out["planner"] = planner(max_records=None, profile=plan.planner_profile)
    if plan.planner_alt_max_records:
        print(f"planner over Kafka, max records {plan.planner_alt_max_records} ...", file=log, flush=True)
        out["planner_alt"] = planner(max_records=plan.planner_alt_max_records, profile=False)
    print(f"decision latency: {plan.latency_trials} trials ...", file=log, flush=True)
    if isolate:
        out["latency"] = _subprocess_json("bench.decision_latency", ["--trials", str(plan.latency_trials), *infra])
    else:
        from bench import decision_latency

        out["latency"] = asdict(decision_latency.measure(plan.latency_trials, bootstrap=bootstrap, redis_url=redis_url))
    print(f"executor scaling: {plan.executors} processes ...", file=log, flush=True)
    if isolate:
        args = ["--executors", *map(str, plan.executors), "--per-executor", str(plan.per_executor), *infra]
        out["executors"] = _subprocess_json("bench.executor_scaling", args)
    else:
        from bench import executor_scaling

        runs = executor_scaling.measure(plan.executors, plan.per_executor, bootstrap=bootstrap, redis_url=redis_url)
        out["executors"] = [asdict(r) for r in runs]
    if plan.health_workers:
        print(f"health monitor scaling: {plan.health_workers} workers ...", file=log, flush=True)
        if isolate:
            args = ["--workers", *map(str, plan.health_workers), "--per-worker", str(plan.health_per_worker), *infra]
            out["health"] = _subprocess_json("bench.health_scaling", args)
        else:
            from bench import health_scaling

            runs = health_scaling.measure(plan.health_workers, plan.health_per_worker, bootstrap=bootstrap)
            out["health"] = [asdict(r) for r in runs]
        out["health_steady"] = _health_at_rest(plan, infra, bootstrap=bootstrap, isolate=isolate, log=log)
        print("health monitor, in-process profile ...", file=log, flush=True)
        records = str(max(100, plan.health_per_worker))
        out["health_profile"] = _subprocess_json("bench.health_scaling", ["--profile-records", records])
    out["rollouts"] = []
    for clusters in plan.rollout_clusters:
        print(f"whole rollout through the services: {clusters} clusters ...", file=log, flush=True)
        if isolate:
            args = ["--clusters", str(clusters), "--timeout", str(plan.rollout_timeout_s), *infra]
            out["rollouts"].append(_subprocess_json("bench.services_rollout", args))
        else:
            from bench import services_rollout

            result = services_rollout.measure(
                clusters, bootstrap=bootstrap, redis_url=redis_url, timeout_s=plan.rollout_timeout_s
            )
            out["rollouts"].append(asdict(result))
    return out


def _health_at_rest(plan: KafkaPlan, infra: list[str], *, bootstrap: str, isolate: bool, log: Any) -> Any:
    """The monitor at rest: heartbeats 30 s apart that change nothing (the page's CPU per heartbeat)."""
    print(f"health monitor at rest: {plan.health_workers} workers ...", file=log, flush=True)
    if isolate:
        args = ["--kind", "steady", "--rounds", str(plan.health_rounds), "--workers", *map(str, plan.health_workers)]
        return _subprocess_json("bench.health_scaling", [*args, "--per-worker", str(plan.health_per_worker), *infra])
    from bench import health_scaling

    runs = health_scaling.measure(
        plan.health_workers, plan.health_per_worker, bootstrap=bootstrap, kind="steady", rounds=plan.health_rounds
    )
    return [asdict(r) for r in runs]


__all__ = [
    "HEALTH_TITLE",
    "KAFKA_FULL",
    "KAFKA_QUICK",
    "KafkaPlan",
    "before_after_lines",
    "charts",
    "collect",
    "health_lines",
    "limits_lines",
    "page_lines",
    "verdicts",
]
