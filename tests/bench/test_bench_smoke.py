"""Each benchmark once at a tiny size, so they keep running as the engine changes (no timing asserts)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import run  # noqa: E402
from bench.engine_cost import measure_baseline, measure_engine  # noqa: E402
from bench.join_cost import measure as measure_joins  # noqa: E402
from bench.whole_rollout import measure_rollout  # noqa: E402
from bench.window_cost import as_json as windows_json  # noqa: E402
from bench.window_cost import measure_windows  # noqa: E402
from bench.window_cost import page_lines as window_lines  # noqa: E402


def test_engine_cost_figures_are_positive() -> None:
    result = measure_engine(400, 300, profile_events=100)
    assert result.plan_s > 0 and result.new_state_s > 0 and result.release_s > 0
    assert result.running > 0, "setup must leave clusters mid-rollout"
    assert set(result.streams) == {"at-gate", "spread"}
    for stream in result.streams.values():
        assert stream.events == 300
        assert stream.events_per_s > 0 and stream.mean_us > 0 and stream.p99_us >= stream.p50_us > 0
    assert result.record_breakdown and all(v > 0 for v in result.record_breakdown.values())
    for profile in result.profile.values():
        assert profile["top_self"] and profile["total_s"] > 0


def test_naive_baseline_figures_are_positive() -> None:
    result = measure_baseline(400, 5, budget_s=0.1)
    assert 3 <= result.events <= 5
    assert result.events_per_s > 0 and result.mean_us > 0


def test_whole_rollout_completes() -> None:
    result = measure_rollout(100, 3)
    assert result.complete
    assert result.wall_s > 0 and result.cpu_s > 0 and result.decide_s > 0
    assert result.decisions > 0 and result.events > 0 and result.batches > 0


def test_whole_rollout_with_old_windows_completes_later() -> None:
    """WIN-1 at fleet scale: every cluster on an hourly window from 2020; batches wait for it."""
    plain, windowed = measure_rollout(100, 3), measure_rollout(100, 3, windows=True)
    assert windowed.windows and windowed.complete
    assert windowed.batches == plain.batches and windowed.simulated_days > plain.simulated_days


def test_quick_run_writes_page_and_charts(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    tiny = run.Plan(
        engine_sizes=[200, 300],
        events=200,
        profile_events=100,
        baseline_budget_s={200: 0.05},
        rollouts=[(100, 5), (100, 3)],
        isolate=False,
        window_engine_sizes=[200],
        window_rollouts=[(100, 3)],
        join_sizes=(100, 200),
        many_joins=200,
    )
    original = run.QUICK
    run.QUICK = tiny
    try:
        run.main(["--quick", "--output", str(page)])
    finally:
        run.QUICK = original
    text = page.read_text()
    assert "## Targets" in text and "events/s" in text and "Closing note" in text
    assert "### Inventory joins during a rollout" in text and "200 inventory joins during a rollout within" in text
    assert (tmp_path / "bench-engine.png").stat().st_size > 0
    assert (tmp_path / "bench-latency.png").stat().st_size > 0
    # the scaling charts (time per event, memory per cluster, naive baseline beside) are SVG text
    for chart in ("bench-scaling-time.svg", "bench-scaling-memory.svg"):
        svg = (tmp_path / chart).read_text()
        assert svg.lstrip().startswith("<?xml") and "naive" in svg
        assert f"]({chart})" in text
    assert "## Maintenance windows from years back: engine and whole rollout" in text
    assert "hourly window from 2020-01-01 within 1.5x of the runs without windows" in text


def test_window_benchmark_simulates_both_fleets() -> None:
    """WIN-1 benchmark at a tiny size: both fleets complete and the page's section names the verdict."""
    result = measure_windows(30, repeats=1)
    assert result.old.complete and result.recent.complete
    assert result.old.window_start.startswith("2020-01-01") and result.recent.window_start.startswith("2025-12-31")
    assert result.old.decisions == result.recent.decisions > 0
    assert result.old.cpu_s > 0 and result.recent.cpu_s > 0
    text = "\n".join(window_lines(windows_json(result)))
    assert "hourly window from 2020-01-01 within 1.5x" in text and ("**met**" in text or "**missed**" in text)


def test_join_benchmark_places_every_joined_cluster() -> None:
    """SEQ-6: the joins go into the stage while its rollout runs (the figures, not their size, here)."""
    result = measure_joins(200, 50)
    assert result.joins == 50 and result.total_s > 0 and result.p99_us >= result.p50_us > 0
