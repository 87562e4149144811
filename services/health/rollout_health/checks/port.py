"""The port a metric check asks its query through: one instant query, one answer, never an exception."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class QueryAnswer:
    """The first sample's value, or why there is none to judge.

    `value` may be NaN or infinite, as Prometheus sends them; `problem` says what went wrong (a
    query error, an unreachable or refusing server, no answer in time). Neither set: no sample.
    """

    value: float | None = None
    problem: str | None = None


class InstantQuery(Protocol):
    """`ask` never raises for a server that errs, refuses or is away: that is an answer with a problem."""

    async def ask(self, query: str, *, base_url: str) -> QueryAnswer: ...
