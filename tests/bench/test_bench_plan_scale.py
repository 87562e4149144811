"""The plan-and-snapshot benchmark (issue 14, target 3) once at a tiny size: it keeps running as the
engine changes, and its page section states every figure beside its limit (no timing asserts)."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.plan_scale import measure_plan, page_lines  # noqa: E402


def test_plan_and_snapshot_figures_are_measured() -> None:
    result = measure_plan(300)
    assert result.clusters == 300
    assert result.new_state_s > 0 and result.release_s > 0
    assert result.plan_s == result.new_state_s + result.release_s
    assert result.commands > 0, "the release hands out the first batches"
    assert result.rss_bytes_per_cluster >= 0
    assert result.snapshot_write_s > 0 and result.snapshot_load_s > 0
    assert result.snapshot_bytes > 300 * len("c-0000000"), "every cluster's name is in the snapshot"
    names = [e.name for e in result.encodings]
    assert names[0].startswith("MessagePack") and "JSON (stdlib)" in names
    assert all(e.size_bytes > 0 and e.write_s > 0 for e in result.encodings)


def test_the_page_section_puts_each_figure_beside_its_limit() -> None:
    row = asdict(measure_plan(200, compare_encodings=False))
    million = row | {"clusters": 1_000_000, "plan_s": 12.0, "rss_bytes_per_cluster": 500.0, "snapshot_write_s": 1.5}
    lines = page_lines([row, million], load="1.00 1.00 1.00")
    table = [line for line in lines if line.startswith("| 1,000,000 |")]
    assert table == [
        f"| 1,000,000 | {row['new_state_s']:.2f} ({row['new_state_cpu_s']:.2f}) | "
        f"{row['release_s']:.2f} ({row['release_cpu_s']:.2f}) | 12.00 | missed | 500 | met | "
        f"1.50 ({row['snapshot_write_cpu_s']:.2f}) | met | "
        f"{row['snapshot_load_s']:.2f} ({row['snapshot_load_cpu_s']:.2f}) | {row['snapshot_bytes'] / 1e6:.1f} |"
    ]
    small = next(line for line in lines if line.startswith("| 200 |"))
    assert small.count(" - ") == 2, "the time limits are stated for a million clusters only"
