"""Maintenance windows (RFC 5545 RRULE + duration) and maintenance exclusions (WIN-1, WIN-2).

Times are UTC epoch seconds: the engine works in plain numbers and only this module touches
calendars.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from functools import cached_property

from dateutil import rrule
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rollout_common.duration import parse_duration
from rollout_common.recurrence import Recurrence, shared

UTC = dt.UTC
_MAX_STRETCH = 64  # occurrences followed while they run into each other (an hourly 1h window never closes)


def to_epoch(moment: dt.datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def from_epoch(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, tz=UTC)


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class MaintenanceWindow(BaseModel):
    """A recurring window; an upgrade may only *start* while one occurrence is open."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: dt.datetime
    duration: float = Field(description="seconds; written as '4h' in files")
    recurrence: str | None = None

    @field_validator("start")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return _aware(value)

    @field_validator("duration", mode="before")
    @classmethod
    def _parse_duration(cls, value: object) -> float:
        seconds = parse_duration(value, field="duration")
        if seconds <= 0:
            raise ValueError("duration must be longer than 0")
        return seconds

    @field_validator("recurrence")
    @classmethod
    def _valid_rrule(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            rrule.rrulestr(value, dtstart=dt.datetime(2026, 1, 1, tzinfo=UTC))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"recurrence {value!r} is not an RFC 5545 RRULE: {exc}") from exc
        return value

    @cached_property
    def _recurrence(self) -> Recurrence | None:
        return None if self.recurrence is None else shared(self.recurrence, self.start)

    def _occurrence_at_or_before(self, moment: dt.datetime) -> dt.datetime | None:
        if self._recurrence is None:
            return self.start if self.start <= moment else None
        return self._recurrence.at_or_before(moment)

    def is_open(self, at: float) -> bool:
        moment = from_epoch(at)
        last = self._occurrence_at_or_before(moment)
        return last is not None and to_epoch(last) <= at < to_epoch(last) + self.duration

    def closes(self, at: float) -> float | None:
        """When the open stretch holding `at` ends (occurrences that touch or overlap run on); None
        when the window is closed at `at` or stays open past every occurrence looked at."""
        if not self.is_open(at):
            return None
        moment = at
        for _ in range(_MAX_STRETCH):
            last = self._occurrence_at_or_before(from_epoch(moment))
            if last is None:
                return None
            moment = to_epoch(last) + self.duration
            if not self.is_open(moment):
                return moment
        return None

    def next_open(self, at: float) -> float | None:
        """The earliest instant >= `at` at which the window is open; None if it never opens again."""
        if self.is_open(at):
            return at
        moment = from_epoch(at)
        if self._recurrence is None:
            return to_epoch(self.start) if self.start > moment else None
        following = self._recurrence.after(moment)
        return None if following is None else to_epoch(following)


class ExclusionScope(str, Enum):
    NO_UPGRADES = "NO_UPGRADES"
    NO_MINOR_UPGRADES = "NO_MINOR_UPGRADES"
    NO_MINOR_OR_NODE_UPGRADES = "NO_MINOR_OR_NODE_UPGRADES"


class MaintenanceExclusion(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    start: dt.datetime
    end: dt.datetime
    scope: ExclusionScope = ExclusionScope.NO_UPGRADES

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return _aware(value)

    @model_validator(mode="after")
    def _ordered(self) -> MaintenanceExclusion:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self

    @cached_property
    def span(self) -> tuple[float, float]:
        return to_epoch(self.start), to_epoch(self.end)

    def blocks(self, *, at: float, nodes: bool, minor_change: bool) -> bool:
        begin, end = self.span
        if not begin <= at < end:
            return False
        if self.scope is ExclusionScope.NO_UPGRADES:
            return True
        if self.scope is ExclusionScope.NO_MINOR_UPGRADES:
            return minor_change
        return minor_change or nodes
