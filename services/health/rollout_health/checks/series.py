"""The check series the planner announces (CHK-2), and when each falls due (pure, `now` passed in).

The planner knows the phases of its tracks, so it says when a series starts and ends (`check_series`
on the progress topic). A running series is evaluated at its `since`, then at `since + k * interval`:
on the planner's grid rather than an interval after each evaluation, so a slow query does not push
every later one back and the planner's "fresh: observed less than two intervals ago" holds. An
evaluation that comes late (a slow Prometheus, a restart) is not repeated for the instants it
missed: the next one is the grid's next instant after it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    rollout_id: str
    stage: str
    check: str


@dataclass(frozen=True, slots=True)
class RunningSeries:
    since: float
    interval: float
    next_at: float

    def after_evaluation(self, at: float) -> RunningSeries:
        """Due next at the first grid instant after `at` (never before `since`)."""
        steps = max(0, math.floor((at - self.since) / self.interval) + 1)
        return RunningSeries(self.since, self.interval, self.since + steps * self.interval)


Book = Mapping[SeriesKey, RunningSeries]


def announced(
    book: Book, key: SeriesKey, *, running: bool, since: float, interval: float
) -> dict[SeriesKey, RunningSeries]:
    """The book after one `check_series` event.

    A repeated start of the series already running changes nothing (the progress topic is read
    from its beginning after a restart, and a planner may say it again); an end removes the
    series it names or an older one, never a newer one that already started.
    """
    current = book.get(key)
    updated = dict(book)
    if running:
        if current is None or current.since != since:
            updated[key] = RunningSeries(since, interval, next_at=since)
        elif current.interval != interval:
            updated[key] = RunningSeries(since, interval, next_at=current.next_at)
    elif current is not None and current.since <= since:
        del updated[key]
    return updated


def due(book: Book, *, now: float) -> list[SeriesKey]:
    """The series to evaluate at `now`, in (rollout, stage, check) order."""
    return sorted(key for key, series in book.items() if series.next_at <= now)


def next_due_at(book: Book) -> float | None:
    """When the earliest series falls due; None when none runs."""
    return min((series.next_at for series in book.values()), default=None)
