"""WIN-1 windows in constant time: the anchored recurrence answers exactly what the plain rrule does.

Random RRULEs of every frequency the window format accepts (with INTERVAL, BYDAY with and without
an ordinal, BYMONTHDAY incl. month ends and negative days, BYHOUR/BYMINUTE, WKST, BYSETPOS, UNTIL,
COUNT), dtstarts from 2010 on (month ends, 29 February, odd seconds), asked at random instants and
exactly at, just before and just after occurrences. All UTC, so no DST.
"""

from __future__ import annotations

import datetime as dt
import time

from dateutil import rrule
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout_common.recurrence import Recurrence
from rollout_common.window import MaintenanceWindow, to_epoch

UTC = dt.UTC
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rules(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]))
    parts = [f"FREQ={freq}"]
    if draw(st.booleans()):
        parts.append(f"INTERVAL={draw(st.integers(1, 5 if freq != 'MINUTELY' else 90))}")
    if freq in ("WEEKLY", "DAILY", "HOURLY") and draw(st.booleans()):
        parts.append("BYDAY=" + ",".join(draw(st.lists(st.sampled_from(DAYS), min_size=1, max_size=3, unique=True))))
    if freq in ("MONTHLY", "YEARLY") and draw(st.booleans()):
        if draw(st.booleans()):
            days = draw(st.lists(st.sampled_from([1, 15, 28, 29, 30, 31, -1, -2]), min_size=1, max_size=2, unique=True))
            parts.append("BYMONTHDAY=" + ",".join(map(str, days)))
        else:
            parts.append(f"BYDAY={draw(st.sampled_from(['1', '2', '-1', '']))}{draw(st.sampled_from(DAYS))}")
            if draw(st.booleans()):
                parts.append(f"BYSETPOS={draw(st.sampled_from([1, -1]))}")
    if freq == "YEARLY" and draw(st.booleans()):
        parts.append(f"BYMONTH={draw(st.integers(1, 12))}")
    if freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY") and draw(st.booleans()):
        parts.append(
            "BYHOUR=" + ",".join(map(str, draw(st.lists(st.integers(0, 23), min_size=1, max_size=2, unique=True))))
        )
    if freq != "MINUTELY" and draw(st.booleans()):
        parts.append(f"BYMINUTE={draw(st.sampled_from([0, 30, 59]))}")
    if freq == "WEEKLY" and draw(st.booleans()):
        parts.append(f"WKST={draw(st.sampled_from(DAYS))}")
    bound = draw(st.integers(0, 5))
    if bound == 0:
        parts.append(f"COUNT={draw(st.integers(1, 400))}")
    elif bound == 1:
        parts.append(f"UNTIL={draw(instants).strftime('%Y%m%dT%H%M%SZ')}")
    return ";".join(parts)


instants = st.datetimes(min_value=dt.datetime(2010, 1, 1), max_value=dt.datetime(2027, 12, 31)).map(
    lambda d: d.replace(microsecond=0, tzinfo=UTC)
)
month_ends = st.builds(
    lambda y, m, h, s: (dt.datetime(y, m % 12 + 1, 1, h, tzinfo=UTC) - dt.timedelta(days=1)).replace(second=s),
    st.integers(2010, 2026),
    st.integers(1, 12),
    st.integers(0, 23),
    st.sampled_from([0, 1, 59]),
)
starts = st.one_of(instants, month_ends, st.just(dt.datetime(2012, 2, 29, 23, 30, tzinfo=UTC)))
# How far back a dtstart may lie, so the plain rrule (the oracle, which walks from it) stays fast.
REACH = {"MINUTELY": dt.timedelta(days=20), "HOURLY": dt.timedelta(days=700)}


def _moments(plain: rrule.rrule, at: dt.datetime) -> list[dt.datetime]:
    """The drawn instant, and each side of and exactly at the occurrences around it (boundaries)."""
    out = [at]
    for near in (plain.before(at, inc=True), plain.after(at)):
        if near is not None:
            out += [near - dt.timedelta(seconds=1), near, near + dt.timedelta(seconds=1)]
    return out


@settings(max_examples=200, deadline=None)
@given(text=rules(), start=starts, at=instants)
def test_win1_anchored_recurrence_answers_as_plain_rrule(text: str, start: dt.datetime, at: dt.datetime) -> None:
    reach = REACH.get(text.split(";")[0].removeprefix("FREQ="))
    if reach is not None and at - start > reach:
        start = at - reach + (start - dt.datetime(2010, 1, 1, tzinfo=UTC)) % reach
    plain = rrule.rrulestr(text, dtstart=start)
    fast = Recurrence(text, start)
    for moment in _moments(plain, at):
        assert fast.at_or_before(moment) == plain.before(moment, inc=True), (text, start, moment)
        assert fast.after(moment) == plain.after(moment, inc=False), (text, start, moment)


def test_win1_answers_do_not_depend_on_the_order_of_questions() -> None:
    """Anchors are cached per bucket; asking backwards in time gives the same answers as forwards."""
    text, start = "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,TH;BYHOUR=3", dt.datetime(2015, 6, 30, 12, tzinfo=UTC)
    plain = rrule.rrulestr(text, dtstart=start)
    fast = Recurrence(text, start)
    moments = [dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(hours=7 * i) for i in range(200)]
    for moment in [*moments, *reversed(moments)]:
        assert fast.at_or_before(moment) == plain.before(moment, inc=True)
        assert fast.after(moment) == plain.after(moment)


def _cost(window: MaintenanceWindow, at: float) -> float:
    began = time.perf_counter()
    for i in range(200):
        window.is_open(at + 60 * i)
        window.next_open(at + 60 * i)
    return time.perf_counter() - began


def test_win1_a_window_from_2015_costs_what_one_from_yesterday_costs() -> None:
    """An hourly window from 2015 used to walk ~100k occurrences per question."""
    at = to_epoch(dt.datetime(2026, 3, 1, 12, 10, tzinfo=UTC))
    old = MaintenanceWindow(start=dt.datetime(2015, 1, 1, tzinfo=UTC), duration="30m", recurrence="FREQ=HOURLY")
    new = MaintenanceWindow(start=dt.datetime(2026, 2, 28, tzinfo=UTC), duration="30m", recurrence="FREQ=HOURLY")
    assert old.is_open(at) and not old.is_open(at + 1200) and old.next_open(at + 1200) == at + 3000
    _cost(old, at), _cost(new, at)  # warm both
    assert _cost(old, at) < 3 * _cost(new, at) + 0.01


def test_win1_a_fleet_on_one_window_definition_asks_dateutil_once_per_instant() -> None:
    """Clusters validated separately hold equal windows: they share one recurrence, which remembers
    its answers, so a dispatch over the fleet costs one question per instant, not one per cluster."""
    windows = [
        MaintenanceWindow.model_validate(
            {"start": "2020-01-01T00:00:00Z", "duration": "30m", "recurrence": "FREQ=HOURLY"}
        )
        for _ in range(3)
    ]
    at = to_epoch(dt.datetime(2026, 1, 1, 0, 40, tzinfo=UTC))
    assert [w.is_open(at) for w in windows] == [False, False, False]
    assert [w.next_open(at) for w in windows] == [at + 1200] * 3
    recurrence = windows[0]._recurrence
    assert recurrence is not None and all(w._recurrence is recurrence for w in windows)
    # the anchored rule's dateutil walk is not repeated: its answers for this instant are remembered
    asked = dict(recurrence._answers)
    assert len(asked) == 2 and windows[2].next_open(at) == at + 1200 and recurrence._answers == asked


def test_win1_one_instant_in_two_zones_is_two_definitions() -> None:
    """A monthly window starting 2020-01-31 23:00 UTC opens on the 31st; the same instant written
    at +02:00 (1 February 01:00) opens on the 1st: they must not share one recurrence."""
    utc, east = (
        MaintenanceWindow.model_validate({"start": start, "duration": "1h", "recurrence": "FREQ=MONTHLY"})
        for start in ("2020-01-31T23:00:00Z", "2020-02-01T01:00:00+02:00")
    )
    at = to_epoch(dt.datetime(2026, 3, 15, tzinfo=UTC))
    assert utc.next_open(at) == to_epoch(dt.datetime(2026, 3, 31, 23, tzinfo=UTC))
    assert east.next_open(at) == to_epoch(dt.datetime(2026, 3, 31, 23, tzinfo=UTC))  # 1 April 01:00 at +02:00
    at = to_epoch(dt.datetime(2026, 4, 2, tzinfo=UTC))
    assert utc.next_open(at) == to_epoch(dt.datetime(2026, 5, 31, 23, tzinfo=UTC))  # April has no 31st
    assert east.next_open(at) == to_epoch(dt.datetime(2026, 4, 30, 23, tzinfo=UTC))  # 1 May 01:00 at +02:00


def test_win3_a_window_closes_at_the_end_of_the_stretch_of_occurrences_it_is_in() -> None:
    """WIN-3: when a queued cluster stops being able to start. Daily 00:00 for 4h closes at 04:00;
    occurrences that overlap run on (every 2h for 3h never leaves a gap, so it never closes within
    the occurrences followed); a closed window has no close."""
    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    at = to_epoch(start) + 3600
    daily = MaintenanceWindow(start=start, duration="4h", recurrence="FREQ=DAILY")
    assert daily.closes(at) == at + 3 * 3600
    assert daily.closes(at + 4 * 3600) is None
    overlapping = MaintenanceWindow(start=start, duration="3h", recurrence="FREQ=HOURLY;INTERVAL=2")
    assert overlapping.closes(at) is None
    once = MaintenanceWindow(start=start, duration="90m")
    assert once.closes(at) == at + 1800
