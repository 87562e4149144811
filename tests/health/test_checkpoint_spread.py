"""Issue 21: a row that changes nothing is checkpointed once per `checkpoint_interval_s`, at a mark
of its cluster's own in the interval (`checkpoint_due`), so a fleet whose rows were all written at
once (the monitor's start, a takeover) is not checkpointed all at once again each interval; and
the row's time never lags the newest heartbeat by the interval, which a takeover's grace assumes."""

from __future__ import annotations

import collections
import random

import pytest

from rollout_health.cluster_health import checkpoint_due

INTERVAL_S = 120.0
BEAT_S = 30.0


def _checkpoints_by_window(clusters: int, *, rounds: int) -> collections.Counter[int]:
    """Every row written at 0 s; each cluster beats every 30 s (spread over the 30 s as a round robin
    does); how many checkpoints each 30 s window of the run writes."""
    rows = [0.0] * clusters
    windows: collections.Counter[int] = collections.Counter()
    for beat in range(1, rounds + 1):
        for index in range(clusters):
            seen_at = beat * BEAT_S + index * BEAT_S / clusters
            if checkpoint_due(f"h-{index:07d}", row_seen=rows[index], seen_at=seen_at, interval_s=INTERVAL_S):
                rows[index] = seen_at
                windows[int(seen_at // BEAT_S)] += 1
    return windows


def test_rows_written_together_are_checkpointed_spread_over_the_interval() -> None:
    windows = _checkpoints_by_window(20_000, rounds=20)
    # 20,000 rows, one checkpoint each per 120 s: 5,000 a 30 s window (the old rule, 120 s after the
    # row's time: 20,000 in one window of every four, none in the others). The first heartbeats
    # (30 to 60 s) also write the rows whose mark passed in the 30 s before them: 7,500.
    assert windows[1] == pytest.approx(7_500, rel=0.02)
    later = [windows[window] for window in range(2, 21)]
    assert min(later) >= 4_900 and max(later) <= 5_100


@pytest.mark.parametrize("seed", range(10))
def test_the_rows_time_never_lags_the_newest_heartbeat_by_the_interval(seed: int) -> None:
    rng = random.Random(seed)
    interval_s = rng.choice([4.0, 45.0, 120.0, 600.0])
    for cluster in (f"c-{rng.randrange(10**6)}" for _ in range(50)):
        row_seen = seen_at = start = rng.uniform(0, 1e9)
        writes = 0
        for _ in range(200):
            seen_at += rng.expovariate(1 / (interval_s / rng.choice([1, 3, 10, 50])))
            if checkpoint_due(cluster, row_seen=row_seen, seen_at=seen_at, interval_s=interval_s):
                row_seen, writes = seen_at, writes + 1
            assert seen_at - row_seen < interval_s
        # one checkpoint per mark passed: at most one per interval of the history
        assert writes <= (seen_at - start) // interval_s + 1
