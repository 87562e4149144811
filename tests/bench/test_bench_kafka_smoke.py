"""Each Kafka benchmark once at a tiny size against the session's broker and Redis (no timing asserts).

They start real service processes and so take tens of seconds together; marked `integration`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    decision_latency,
    executor_scaling,
    health_scaling,
    kafka_planner,
    run,
    services_rollout,
    splice,
)

pytestmark = pytest.mark.integration


def test_planner_over_kafka_commits_every_event(kafka_bootstrap: str, redis_url: str) -> None:
    result = kafka_planner.measure(150, 200, bootstrap=kafka_bootstrap, redis_url=redis_url, profile=True)
    assert result.committed == 200
    assert result.planner_events_per_s > 0 and result.raw_events_per_s > 0
    assert result.in_persist_s > 0 and result.snapshot_bytes > 0
    assert "Planner" in result.profile_text


def test_decision_latency_pairs_each_trial_with_a_raw_round_trip(kafka_bootstrap: str, redis_url: str) -> None:
    result = decision_latency.measure(3, bootstrap=kafka_bootstrap, redis_url=redis_url)
    assert result.trials == 3 and len(result.samples_ms) == len(result.raw_samples_ms) == 3
    assert result.planner_ms["p99"] >= result.planner_ms["p50"] > 0
    assert result.raw_ms["p50"] > 0
    assert result.redis_rtt_ms["p50"] > 0  # the breakdown's Redis round trip, measured in the same run


def test_executor_scaling_upgrades_everything(kafka_bootstrap: str, redis_url: str) -> None:
    runs = executor_scaling.measure([1, 2], 5, bootstrap=kafka_bootstrap, redis_url=redis_url)
    assert [r.executors for r in runs] == [1, 2]
    assert all(r.upgrades_per_s > 0 for r in runs)
    assert runs[0].efficiency == pytest.approx(1.0)


def test_health_scaling_turns_every_heartbeat_into_readiness(kafka_bootstrap: str) -> None:
    # 200 a worker: the workers' CPU is read in clock ticks (10 ms), and 10 heartbeats now take less
    runs = health_scaling.measure([1, 2], 200, bootstrap=kafka_bootstrap)
    assert [(r.workers, r.heartbeats, r.partitions) for r in runs] == [(1, 200, 4), (2, 400, 4)]
    assert all(r.readiness_per_s > 0 and r.workers_cpu_s > 0 for r in runs)
    assert runs[0].efficiency == pytest.approx(1.0)
    # the in-process profile of the monitor's own work (no broker), shown with the missed-target notes
    profile = health_scaling.profile_on_record(10)
    assert profile["records"] == 10 and profile["cpu_us_per_heartbeat"] > 0
    assert "HealthMonitor.on_record" in profile["pyinstrument"]


def test_services_rollout_completes(kafka_bootstrap: str, redis_url: str) -> None:
    result = services_rollout.measure(40, bootstrap=kafka_bootstrap, redis_url=redis_url, timeout_s=90)
    assert result.complete
    assert result.upgrades == 80 and result.wall_s > 0


def test_quick_run_with_kafka_writes_its_sections(tmp_path: Path, kafka_bootstrap: str, redis_url: str) -> None:
    page = tmp_path / "benchmarks.md"
    tiny = run.Plan(
        engine_sizes=[200, 300],
        events=200,
        profile_events=100,
        baseline_budget_s={200: 0.05},
        rollouts=[(100, 3)],
        isolate=False,
    )
    tiny_kafka = run.kafka_report.KafkaPlan(
        planner_clusters=100,
        planner_events=100,
        planner_profile=False,
        planner_alt_max_records=None,
        latency_trials=2,
        executors=[1, 2],
        per_executor=5,
        rollout_clusters=[40],
        rollout_timeout_s=90.0,
    )
    originals = (run.QUICK, run.KAFKA_QUICK)
    run.QUICK, run.KAFKA_QUICK = tiny, tiny_kafka
    try:
        infra = ["--kafka-bootstrap", kafka_bootstrap, "--redis-url", redis_url]
        run.main(["--quick", "--output", str(page), "--json", str(tmp_path / "figures.json"), *infra])
    finally:
        run.QUICK, run.KAFKA_QUICK = originals
    text = page.read_text()
    for heading in ("Planner over Kafka", "Decision latency", "Executor scaling", "through the real services"):
        assert heading in text
    assert (tmp_path / "bench-executors.png").stat().st_size > 0
    assert (tmp_path / "bench-latency-kafka.png").stat().st_size > 0
    # Re-rendering only the planner and latency sections (bench.splice) gives the same sections.
    kafka = json.loads((tmp_path / "figures.json").read_text())["kafka"]
    stale = text.replace("| planner over Kafka >=", "| planner over Kafka (stale) >=")
    spliced = splice.splice(stale, kafka)
    assert spliced.count("## Planner over Kafka: readiness events per second") == 1
    assert "(stale)" in stale and "(stale)" not in spliced
    assert spliced.split("## Executor scaling")[1] == text.split("## Executor scaling")[1]
