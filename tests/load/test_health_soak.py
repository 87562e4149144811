"""A sustained minute through the real health path: heartbeats -> two monitor workers -> the planner.

The 60 s version of `make soak-health` (`bench.soak_health`, issue 21 item 5), run by `make test`
beside the suite (`make soak-health-test`), at a rate a loaded 2-core CI machine holds: every
cluster beats every 10 s, one heartbeat in 100 changes its cluster's readiness, and the planner
has a rollout in progress. The lags' bounds are generous
(the machine is shared) but finite; the counts are exact: every readiness change sent arrives,
and no cluster that was beating is called stale (GATE-1 would stop the rollout on it).

Knobs: `ROLLOUT_HEALTH_SOAK_SECONDS`, `ROLLOUT_HEALTH_SOAK_RATE` (heartbeats/s).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

# The harness is the repository's `bench` package (`make soak-health`), not tests/bench.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.soak_health import Bounds, run_async, table  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.health_soak, pytest.mark.asyncio(loop_scope="session")]

SECONDS = float(os.environ.get("ROLLOUT_HEALTH_SOAK_SECONDS", "60"))
RATE = float(os.environ.get("ROLLOUT_HEALTH_SOAK_RATE", "500"))
INTERVAL_S = 10.0
FLIP_EVERY = 100
WORKERS = 2
# Bounds for a loaded shared machine, well above what an idle one shows (readiness p99 about
# 0.3 s, decision p99 about 0.8 s); the 2 s limit of issue 21 is judged by `make soak-health`.
MAX_READINESS_P99_S = 5.0
MAX_READINESS_S = 15.0
MAX_DECISION_P99_S = 10.0
# The monitors' group commits on faust's timer (about 2.8 s): a heartbeat waits that long to count.
MAX_HEARTBEAT_LAG_S = 20.0
# Each wait of the run is bounded so that a stall fails it, naming what it waited for and where the
# topics and groups stood, inside pytest's timeout (600 s): 120 s for each group to form and for the
# first stage-advance (the monitors' group took up to 40 s at a load average of 45 on 2 cores), 60 s
# of warm-up for 5,000 clusters (about 20 s there), SECONDS of heartbeats, 60 s to drain.
BOUNDS = Bounds(start_s=120.0, warm_up_s=45.0, warm_up_s_per_cluster=0.003, drain_s=60.0)


async def test_health_path_holds_a_sustained_heartbeat_rate_with_no_false_stale(
    kafka_bootstrap: str, redis_url: str, tmp_path: Path
) -> None:
    """GATE-1 / BUS-7: heartbeats at RATE for SECONDS through two monitors to the planner, a
    rollout in progress: every readiness change arrives within bounded lags and no beating
    cluster is marked stale."""
    result = await run_async(
        kafka_bootstrap,
        redis_url,
        tmp_path,
        rate=RATE,
        seconds=SECONDS,
        workers=WORKERS,
        interval_s=INTERVAL_S,
        flip_every=FLIP_EVERY,
        bounds=BOUNDS,
    )
    print(json.dumps(asdict(result)))
    print(table(result))

    sent = int(RATE * SECONDS)
    assert result.produced_rate >= 0.9 * RATE, "the test's producer fell behind; the figures mean nothing"
    assert result.clusters == int(RATE * INTERVAL_S)
    assert result.readiness_changes_sent == result.produced // FLIP_EVERY
    assert result.produced >= 0.99 * sent
    # what was left behind first: it says which side stalled when a change is missing
    assert result.stalled == "", table(result)
    assert result.heartbeats_uncommitted == 0, table(result)
    assert result.readiness_undecided == 0, table(result)
    assert result.readiness_changes_seen == result.readiness_changes_sent, table(result)
    assert result.readiness_lag.count == result.readiness_changes_sent
    assert result.stale_marks == 0
    assert result.false_stale == 0
    assert result.stage_advances >= 1, "no rollout in progress"
    assert result.decision_lag.count == result.readiness_changes_sent, "the planner did not take every change in"
    assert result.readiness_lag.p99_s <= MAX_READINESS_P99_S, table(result)
    assert result.readiness_lag.max_s <= MAX_READINESS_S, table(result)
    assert result.decision_lag.p99_s <= MAX_DECISION_P99_S, table(result)
    assert result.heartbeat_lag.max_s <= MAX_HEARTBEAT_LAG_S, table(result)
