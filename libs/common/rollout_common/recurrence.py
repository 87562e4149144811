"""An RFC 5545 RRULE asked about one instant, at a cost that does not grow with the rule's age (WIN-1).

dateutil's rrule answers `before` and `after` by walking every occurrence from its dtstart, so a
window defined years ago costs thousands of steps per question (an hourly window from 2020: half a
second), asked once per cluster per dispatch. Windows are defined once and kept for years.

`Recurrence` asks instead an *anchored* copy of the rule whose dtstart sits a few periods before
the instant. The copy generates exactly the original's occurrences from its dtstart on because:

- every value the original took from its dtstart by default (BYHOUR/BYMINUTE/BYSECOND below the
  frequency, BYDAY of a weekly rule, BYMONTHDAY of a monthly one, BYMONTH and BYMONTHDAY of a
  yearly one) is passed explicitly, as dateutil normalised it, so a later dtstart changes none;
- the dtstart moves forward by a whole number of INTERVALs of the frequency's unit, so the
  interval phase (which days, weeks, months or hours are "on") is kept, then down to the start of
  its period (midnight, the WKST day of its week, the 1st of its month, ...), so no occurrence of
  that period is cut off; all other BYxxx parts are absolute calendar filters and UNTIL an
  absolute bound, both unchanged.

Anchors are taken on a grid of `_BUCKET` intervals, so one anchored rule serves many questions
and the answer never depends on which questions came before. A rule too sparse to have an
occurrence between anchor and instant (a yearly 29 February) retries from anchors further back,
up to the original rule. A rule with COUNT counts from its first occurrence, so it is not
re-anchored: its at most COUNT occurrences are listed once and bisected. A recurrence dateutil
reads as a set (several rules, EXDATE) is answered by dateutil as it stands.

A fleet shares a few window definitions, and a dispatch asks every queued cluster's window about
the same instant: `shared` hands equal definitions one `Recurrence`, which remembers its last
answers, so a thousand clusters on one window cost one question, not a thousand (even anchored,
a question walks a dozen occurrences in dateutil).
"""

from __future__ import annotations

import bisect
import datetime as dt
from functools import lru_cache
from typing import Any

from dateutil import rrule
from dateutil.relativedelta import relativedelta

_BUCKET = 8  # intervals one anchored rule serves
_MARGIN = 2  # intervals between an anchor and the bucket it serves: room for the previous occurrence
_FALLBACK_GROWTH = 8  # how much further back each retry of a sparse rule anchors
_FIXED_UNIT = {
    rrule.WEEKLY: dt.timedelta(weeks=1),
    rrule.DAILY: dt.timedelta(days=1),
    rrule.HOURLY: dt.timedelta(hours=1),
    rrule.MINUTELY: dt.timedelta(minutes=1),
    rrule.SECONDLY: dt.timedelta(seconds=1),
}
_MONTHS = {rrule.YEARLY: 12, rrule.MONTHLY: 1}
_REMEMBERED = 64  # answers kept per recurrence: the instants of the last few dispatches


class Recurrence:
    """`at_or_before` and `after` of one RRULE (UTC), in time independent of its dtstart's age."""

    def __init__(self, text: str, start: dt.datetime) -> None:
        parsed = rrule.rrulestr(text, dtstart=start)
        self._rule: rrule.rrule | rrule.rruleset = parsed
        self._listed: list[dt.datetime] | None = None
        self._anchors: dict[int, rrule.rrule] = {}
        self._fields: dict[str, Any] | None = None
        if isinstance(parsed, rrule.rrule):
            if _private(parsed, "count") is not None:
                self._listed = list(parsed)
            else:
                self._fields = _explicit_fields(parsed)
        self._answers: dict[tuple[bool, dt.datetime], dt.datetime | None] = {}

    def at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        """The last occurrence at or before `moment`, or None."""
        return self._remembered(False, moment)

    def after(self, moment: dt.datetime) -> dt.datetime | None:
        """The first occurrence strictly after `moment`, or None."""
        return self._remembered(True, moment)

    def _remembered(self, later: bool, moment: dt.datetime) -> dt.datetime | None:
        key = (later, moment)
        if key in self._answers:
            return self._answers[key]
        if len(self._answers) >= _REMEMBERED:  # the clock moves forward: old instants are not asked again
            self._answers.clear()
        found = self._after(moment) if later else self._at_or_before(moment)
        self._answers[key] = found
        return found

    def _at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        if self._listed is not None:
            index = bisect.bisect_right(self._listed, moment)
            return self._listed[index - 1] if index else None
        if self._fields is None:
            found: dt.datetime | None = self._rule.before(moment, inc=True)
            return found
        until: dt.datetime | None = self._fields["until"]
        if until is not None and moment > until:
            moment = until
        steps = self._steps(moment)
        back = 0
        while True:
            rule = self._anchored(steps - back)
            found = rule.before(moment, inc=True)
            if found is not None or rule is self._rule:
                return found
            back = max(back * _FALLBACK_GROWTH, _BUCKET)

    def _after(self, moment: dt.datetime) -> dt.datetime | None:
        if self._listed is not None:
            index = bisect.bisect_right(self._listed, moment)
            return self._listed[index] if index < len(self._listed) else None
        if self._fields is None:
            found: dt.datetime | None = self._rule.after(moment, inc=False)
            return found
        return self._anchored(self._steps(moment)).after(moment, inc=False)

    def _steps(self, moment: dt.datetime) -> int:
        """Whole intervals from the rule's dtstart to `moment` (negative before it)."""
        assert self._fields is not None
        start: dt.datetime = self._fields["dtstart"]
        interval: int = self._fields["interval"]
        freq: int = self._fields["freq"]
        if freq in _MONTHS:
            months = (moment.year - start.year) * 12 + moment.month - start.month
            return months // (_MONTHS[freq] * interval)
        return (moment - start) // (_FIXED_UNIT[freq] * interval)

    def _anchored(self, steps: int) -> rrule.rrule:
        """The rule re-anchored for instants `steps` intervals after its dtstart."""
        assert self._fields is not None and isinstance(self._rule, rrule.rrule)
        bucket = steps // _BUCKET
        shift = bucket * _BUCKET - _MARGIN
        if shift <= 0:
            return self._rule
        cached = self._anchors.get(shift)
        if cached is None:
            if len(self._anchors) > 4:  # the simulated clock moves forward: old anchors are not asked again
                self._anchors.clear()
            fields = dict(self._fields)
            fields["dtstart"] = _period_start(_shifted(fields, shift), freq=fields["freq"], wkst=fields["wkst"])
            cached = self._anchors[shift] = rrule.rrule(**fields)
        return cached


def shared(text: str, start: dt.datetime) -> Recurrence:
    """One `Recurrence` per definition, whichever cluster's window asks (answers depend on nothing else).

    Keyed by the start's time zone too: datetimes of one instant in two zones compare equal, but a
    rule counts its days and months on the start's own wall clock."""
    return _shared(text, start, start.tzinfo)


@lru_cache(maxsize=256)
def _shared(text: str, start: dt.datetime, zone: dt.tzinfo | None) -> Recurrence:
    return Recurrence(text, start)


def _private(rule: rrule.rrule, name: str) -> Any:
    # dateutil keeps the normalised rule (defaults from dtstart filled in) only in private fields.
    return getattr(rule, f"_{name}")


def _explicit_fields(rule: rrule.rrule) -> dict[str, Any]:
    """The rule's constructor arguments with every default taken from its dtstart made explicit."""
    weekdays = [rrule.weekday(d) for d in _private(rule, "byweekday") or ()]
    weekdays += [rrule.weekday(d, n) for d, n in _private(rule, "bynweekday") or ()]
    monthdays = [*(_private(rule, "bymonthday") or ()), *(_private(rule, "bynmonthday") or ())]

    def listed(name: str) -> tuple[int, ...] | None:
        values = _private(rule, name)
        return None if values is None else tuple(sorted(values))

    return {
        "freq": _private(rule, "freq"),
        "dtstart": _private(rule, "dtstart"),
        "interval": _private(rule, "interval"),
        "wkst": _private(rule, "wkst"),
        "until": _private(rule, "until"),
        "bysetpos": listed("bysetpos"),
        "bymonth": listed("bymonth"),
        "bymonthday": tuple(monthdays) or None,
        "byyearday": listed("byyearday"),
        "byeaster": listed("byeaster"),
        "byweekno": listed("byweekno"),
        "byweekday": tuple(weekdays) or None,
        "byhour": listed("byhour"),
        "byminute": listed("byminute"),
        "bysecond": listed("bysecond"),
    }


def _shifted(fields: dict[str, Any], steps: int) -> dt.datetime:
    start: dt.datetime = fields["dtstart"]
    freq: int = fields["freq"]
    count: int = steps * fields["interval"]
    if freq in _MONTHS:
        moved: dt.datetime = start + relativedelta(months=count * _MONTHS[freq])
        return moved
    return start + _FIXED_UNIT[freq] * count


def _period_start(moment: dt.datetime, *, freq: int, wkst: int) -> dt.datetime:
    """The first instant of the frequency's period (year, month, week from WKST, day, ...) holding `moment`."""
    if freq == rrule.SECONDLY:
        return moment
    if freq == rrule.MINUTELY:
        return moment.replace(second=0)
    if freq == rrule.HOURLY:
        return moment.replace(minute=0, second=0)
    day = moment.replace(hour=0, minute=0, second=0)
    if freq == rrule.DAILY:
        return day
    if freq == rrule.WEEKLY:
        return day - dt.timedelta(days=(day.weekday() - wkst) % 7)
    if freq == rrule.MONTHLY:
        return day.replace(day=1)
    return day.replace(month=1, day=1)
