"""CHK-2: the check series the planner announces (`check_series`), and when the health service
evaluates each: at the series' `since`, then at `since + k * interval` until the planner ends it.
Pure, `now` passed in."""

from __future__ import annotations

from rollout_health.checks import RunningSeries, SeriesKey, announced, due, next_due_at

ERRORS = SeriesKey("r-1", "prod", "errors")
LATENCY = SeriesKey("r-1", "prod", "latency")


def test_chk2_a_series_evaluates_at_its_start_then_on_its_grid() -> None:
    book = announced({}, ERRORS, running=True, since=1000.0, interval=30.0)
    assert due(book, now=999.9) == []
    assert due(book, now=1000.0) == [ERRORS]
    # asked at 1000.4 (a slow round): next at 1030 on the grid, not 1030.4
    book = {ERRORS: book[ERRORS].after_evaluation(1000.4)}
    assert book[ERRORS] == RunningSeries(since=1000.0, interval=30.0, next_at=1030.0)
    assert due(book, now=1029.9) == []
    assert next_due_at(book) == 1030.0


def test_chk2_a_late_evaluation_skips_the_instants_it_missed() -> None:
    """A runner that was away (restarted, a Prometheus timing out) asks once, not once per missed instant."""
    series = RunningSeries(since=1000.0, interval=30.0, next_at=1000.0)
    assert series.after_evaluation(1095.0).next_at == 1120.0  # 1030, 1060 and 1090 were missed
    assert series.after_evaluation(1090.0).next_at == 1120.0  # exactly on the grid: the next instant
    # a clock behind the planner's (asked before `since`): the series' start is still its first instant
    assert series.after_evaluation(940.0).next_at == 1000.0


def test_chk2_an_end_stops_the_series_and_a_new_start_evaluates_at_once() -> None:
    book = announced({}, ERRORS, running=True, since=1000.0, interval=30.0)
    book = announced(book, LATENCY, running=True, since=1000.0, interval=60.0)
    book = {key: series.after_evaluation(1000.0) for key, series in book.items()}
    book = announced(book, ERRORS, running=False, since=1000.0, interval=30.0)
    assert list(book) == [LATENCY]
    book = announced(book, ERRORS, running=True, since=1045.0, interval=30.0)
    assert due(book, now=1045.0) == [ERRORS]
    assert next_due_at(book) == 1045.0


def test_chk2_a_repeated_start_keeps_the_series_place_and_an_old_end_keeps_a_newer_series() -> None:
    """The progress topic is read from its beginning after a restart, and the planner may say a
    series again: that changes nothing; an end names its series by `since`."""
    book = announced({}, ERRORS, running=True, since=1000.0, interval=30.0)
    book = {ERRORS: book[ERRORS].after_evaluation(1000.0)}
    assert announced(book, ERRORS, running=True, since=1000.0, interval=30.0) == book
    newer = announced(book, ERRORS, running=True, since=1200.0, interval=30.0)
    assert announced(newer, ERRORS, running=False, since=1000.0, interval=30.0) == newer
    assert announced(newer, LATENCY, running=False, since=1000.0, interval=30.0) == newer
    assert announced(newer, ERRORS, running=False, since=1200.0, interval=30.0) == {}


def test_chk2_series_are_due_per_rollout_stage_and_check_in_a_stable_order() -> None:
    book = {
        SeriesKey("r-2", "prod", "errors"): RunningSeries(since=0.0, interval=10.0, next_at=10.0),
        LATENCY: RunningSeries(since=0.0, interval=10.0, next_at=20.0),
        SeriesKey("r-1", "canary", "errors"): RunningSeries(since=0.0, interval=10.0, next_at=10.0),
        ERRORS: RunningSeries(since=0.0, interval=10.0, next_at=5.0),
    }
    assert due(book, now=10.0) == [SeriesKey("r-1", "canary", "errors"), ERRORS, SeriesKey("r-2", "prod", "errors")]
    assert next_due_at(book) == 5.0
    assert next_due_at({}) is None
