"""Times that messages carry (epoch seconds), bounded where they enter (BUS-4, BUS-7).

A reader orders a cluster's observations by these times, so one time far ahead (or infinite) would
make every later real observation look older, for good. Two bounds, one for every topic's time fields:

- in the model: a finite number between 0 and the end of year 9999 (also what the published JSON
  Schema says), so a time beyond any clock is refused by whoever decodes it, on every path;
- where a reader has a clock: no more than `MAX_FUTURE_SKEW_S` ahead of it (`check_not_ahead`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from rollout_common.errors import InvalidInputError

LATEST_EPOCH = 253_402_300_799.0  # 9999-12-31T23:59:59Z
# How far ahead of a reader's clock a producer's may be: clocks of hosts kept by NTP agree within
# milliseconds; tens of seconds is a clock that is wrong, and its times must not order anything.
MAX_FUTURE_SKEW_S = 30.0

EpochSeconds = Annotated[float, Field(ge=0, le=LATEST_EPOCH, allow_inf_nan=False)]
"""A time field of a message: a finite number of seconds since 1970, within year 9999."""


def check_not_ahead(model: BaseModel, *, now: float, skew_s: float, reader: str, setting: str) -> None:
    """InvalidInputError, naming the field, when a time the model carries is more than `skew_s` ahead
    of `now` (the reader's clock); the fields are the model's `TIME_FIELDS` (field name, wire name)."""
    for field, alias in getattr(model, "TIME_FIELDS", ()):
        at = getattr(model, field)
        if at is not None and at - now > skew_s:
            raise InvalidInputError(
                f"invalid {type(model).__name__}: {alias} is {at - now:.0f} s ahead of the {reader}'s clock "
                f"(limit {setting}={skew_s:g}); check the clock of whoever sent it"
            )


__all__ = ["LATEST_EPOCH", "MAX_FUTURE_SKEW_S", "EpochSeconds", "check_not_ahead"]
