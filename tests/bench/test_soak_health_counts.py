"""The sustained health run's bookkeeping, without a broker: what it calls a false stale mark, how
it times a readiness change, and where its section goes in docs/benchmarks.md."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.soak_health import SECTION_TITLE, _readiness_record, _Tracker, carry_over, place  # noqa: E402
from bench.soak_health_waits import Progress  # noqa: E402


def test_a_stale_mark_of_a_cluster_beating_within_the_limit_is_false() -> None:
    """GATE-1: a cluster whose last heartbeat is 10 s old when marked stale (limit 90 s) was beating."""
    tracker = _Tracker()
    tracker.beat("h-0000001", 1000.0)
    tracker.beat("h-0000002", 900.0)
    _readiness_record(
        tracker, {"cluster": "h-0000001", "ready": False, "reason": "stale: no heartbeat for 95 s"}, 0, 7, 1_010_000
    )
    assert (tracker.stale_marks, tracker.false_stale) == (1, 1)
    # silent for 110 s: a true stale mark
    _readiness_record(
        tracker, {"cluster": "h-0000002", "ready": False, "reason": "stale: no heartbeat for 110 s"}, 1, 3, 1_010_000
    )
    assert (tracker.stale_marks, tracker.false_stale, tracker.changes_seen) == (2, 1, 0)
    assert {p: list(records) for p, records in tracker.readiness.items()} == {0: [(7, 1010.0)], 1: [(3, 1010.0)]}


def test_a_stale_mark_is_judged_as_of_the_time_it_speaks_of() -> None:
    """A worker behind publishes at 1260 a mark of a cluster silent as of 1100 (observedAt), its
    heartbeats at 800, 900, then every 30 s from 1110: silent 200 s at 1100, so the mark is true
    though heartbeats came before it was published. One that beat at 1050 was beating at 1100:
    false."""
    tracker = _Tracker()
    for at in (800.0, 900.0, 1110.0):
        tracker.beat("h-0000001", at)
    tracker.beat("h-0000002", 1050.0)
    for at in (1140.0, 1170.0, 1200.0, 1230.0, 1260.0):  # what a worker 160 s behind has not read
        tracker.beat("h-0000001", at)
    for cluster in ("h-0000001", "h-0000002"):
        body = {"cluster": cluster, "ready": False, "reason": "stale: no heartbeat", "observedAt": 1100.0}
        _readiness_record(tracker, body, 0, 1, 1_260_000)
    assert (tracker.stale_marks, tracker.false_stale) == (2, 1)


def test_a_flip_to_not_ready_of_a_cluster_marked_stale_is_absorbed_not_awaited() -> None:
    tracker = _Tracker()
    tracker.flip("h-0000001", 1000.0, ready=False)
    tracker.flip("h-0000002", 1000.0, ready=True)
    for cluster in ("h-0000001", "h-0000002"):
        body = {"cluster": cluster, "ready": False, "reason": "stale: no heartbeat", "observedAt": 1005.0}
        _readiness_record(tracker, body, 0, 1, 1_010_000)
    # the flip to ready still makes a change: it is awaited, and timed when it comes
    assert (tracker.flips_absorbed, tracker.flips, tracker.flips_sent) == (1, {"h-0000002": [(1000.0, True)]}, 2)
    _readiness_record(tracker, {"cluster": "h-0000002", "ready": True, "reason": "reported ready"}, 0, 2, 1_012_000)
    assert (tracker.changes_seen, tracker.readiness_lags, tracker.flips) == (1, [12.0], {})


def test_a_readiness_change_is_timed_from_its_heartbeat_once() -> None:
    tracker = _Tracker()
    tracker.flip("h-0000004", 1000.25, ready=False)
    body = {"cluster": "h-0000004", "ready": False, "reason": None}
    _readiness_record(tracker, body, 2, 40, 1_000_750)
    _readiness_record(tracker, body, 2, 41, 1_001_000)  # no flip outstanding: not timed again
    assert tracker.readiness_lags == [0.5]
    assert (tracker.changes_seen, tracker.flips) == (1, {})


def test_a_cluster_that_flips_again_before_its_last_flip_came_has_both_timed_in_order() -> None:
    """Monitors 40 s behind: the cluster's flip of the next round (30 s later) is produced before the
    first flip's readiness comes; each readiness times the oldest flip still waiting."""
    tracker = _Tracker()
    tracker.flip("h-0000005", 1000.0, ready=False)
    tracker.flip("h-0000005", 1030.0, ready=True)
    for offset, (ready, at_ms) in enumerate([(False, 1_040_000), (True, 1_070_000)]):
        _readiness_record(tracker, {"cluster": "h-0000005", "ready": ready, "reason": None}, 0, offset, at_ms)
    assert (tracker.readiness_lags, tracker.changes_seen, tracker.flips) == ([40.0, 40.0], 2, {})


def test_the_section_goes_before_the_notes_and_is_replaced_then_kept_by_a_rewritten_page() -> None:
    page = "# Benchmarks\n\n## Health\n\nfigures\n\n## Closing note\n\nend\n"
    first = place(page, [SECTION_TITLE, "", "run one", ""])
    assert first == f"# Benchmarks\n\n## Health\n\nfigures\n\n{SECTION_TITLE}\n\nrun one\n\n## Closing note\n\nend\n"
    second = place(first, [SECTION_TITLE, "", "run two", ""])
    assert second == first.replace("run one", "run two")
    assert carry_over(second, page) == second
    assert carry_over(page, "# Rewritten\n") == "# Rewritten\n"


def test_where_a_stalled_run_stood_names_the_partitions_the_monitors_stopped_committing() -> None:
    seen = Progress(
        heartbeats={0: 3777, 1: 3683, 2: 3753, 3: 3777},
        monitors_committed={0: 3777, 1: 3683, 2: 2, 3: 3},
        readiness={0: 10, 1: 12},
        planner_committed={0: 10, 1: 11},
        stage_advances=3,
        monitor_group="group Stable with 2 members",
    )
    assert seen.behind() == {2: (2, 3753), 3: (3, 3777)}
    assert str(seen) == (
        "heartbeat partitions the monitors have not committed to the end: 2: 2 of 3753, 3: 3 of 3777; "
        'heartbeats end {"0": 3777, "1": 3683, "2": 3753, "3": 3777}, committed by the monitors '
        '{"0": 3777, "1": 3683, "2": 2, "3": 3} (group Stable with 2 members); readiness end {"0": 10, "1": 12}, '
        'committed by the planner {"0": 10, "1": 11}; stage-advances 3'
    )
