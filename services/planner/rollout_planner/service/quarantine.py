"""BUS-9: an event the engine cannot apply is set aside; the events around it are applied.

When `decide` raises on a poll's batch, the state it was given is half-changed (the engine updates
it in place), so the batch is searched from the state before it, rebuilt from what the store
already holds (the last snapshot plus the journal, exactly as at a restart). Copying the state
before every batch would cost time proportional to the fleet on every poll (a 100k-cluster state
takes seconds to copy); rebuilding costs that only on the rare batch that raises.

The search bisects: the batch's events are tried from a fresh copy of the state before it; a half
that raises is split again, until each event that raises on its own (after the good ones before it)
is found. The good events, in their order, are then decided as one batch, which is what the journal
records, so a replay reaches the same state and never sees the bad event. One bad event among `n`
costs about `log2 n + 2` trial decisions, each from its own copy of the state (`k` bad ones about
`2 k log2 n`); the copies are the cost at scale (docs/reliability.md has the figures).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rollout_common.commands import Command
from rollout_common.errors import PermanentError
from rollout_common.events import Event, EventBatch
from rollout_planner.engine import EngineState
from rollout_planner.service.journal import ENGINE_VERSION

Decide = Callable[[EngineState, EventBatch, float], tuple[EngineState, list[Command]]]


class EngineFailureError(PermanentError):
    """The engine raises with none of the batch's events: the fault is in the state or the engine,
    not in an event that could be set aside."""


@dataclass(frozen=True)
class Rejected:
    event: Event
    error: Exception


@dataclass
class Quarantined:
    """The outcome of a searched batch: the state and commands of its good events, and the bad ones."""

    state: EngineState
    commands: list[Command]
    applied: list[Event]
    rejected: list[Rejected] = field(default_factory=list)


def engine_version() -> str:
    """The version of the planner's engine, named in dead letters so a fixed engine can be told apart.

    The same text the journal stamps on its entries, so a dead letter and a journal entry compare.
    """
    return ENGINE_VERSION


def describe(error: BaseException) -> str:
    first_line = (str(error).splitlines() or [""])[0][:500]
    return f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__


class _Search:
    def __init__(self, *, decide: Decide, fresh: Callable[[], EngineState], fixed: Sequence[Event], now: float) -> None:
        self._decide = decide
        self._fresh = fresh
        self._fixed = tuple(fixed)
        self._now = now
        self.rejected: list[Rejected] = []
        self.last: tuple[tuple[int, ...], EngineState, list[Command]] | None = None
        self.trials = 0

    def trial(self, events: Sequence[Event]) -> Exception | None:
        """Decide `events` (and the fixed ones) from a fresh state; the exception, or None and kept."""
        self.trials += 1
        batch = (*events, *self._fixed)
        try:
            state, commands = self._decide(self._fresh(), EventBatch(events=batch), self._now)
        except Exception as exc:
            return exc
        self.last = (tuple(map(id, events)), state, commands)
        return None

    def keep(self, prefix: list[Event], candidates: list[Event], known: Exception | None = None) -> list[Event]:
        """The candidates that can follow `prefix` (which decides without raising)."""
        if not candidates:
            return []
        error = known if known is not None else self.trial(prefix + candidates)
        if error is None:
            return candidates
        if len(candidates) == 1:
            self.rejected.append(Rejected(candidates[0], error))
            return []
        middle = len(candidates) // 2
        left = self.keep(prefix, candidates[:middle])
        return left + self.keep(prefix + left, candidates[middle:])


def search(
    *,
    decide: Decide,
    fresh: Callable[[], EngineState],
    events: Sequence[Event],
    fixed: Sequence[Event],
    now: float,
    error: Exception,
) -> Quarantined:
    """Set aside the events of a batch that make `decide` raise (`error`: what the whole batch raised).

    `events` may be set aside, `fixed` (a timer's wake-up) may not; `fresh()` returns a new copy of
    the state before the batch each time it is called.
    """
    finder = _Search(decide=decide, fresh=fresh, fixed=fixed, now=now)
    base = finder.trial([])
    if base is not None:
        raise EngineFailureError(f"the engine raises without any event of the batch: {describe(base)}") from base
    good = finder.keep([], list(events), known=error)
    if finder.last is None or finder.last[0] != tuple(map(id, good)):
        again = finder.trial(good)
        if again is not None:  # the engine is not deterministic: nothing can be set aside safely
            raise EngineFailureError(f"the engine raised on events it had applied: {describe(again)}") from again
    assert finder.last is not None
    _, state, commands = finder.last
    return Quarantined(state=state, commands=commands, applied=good, rejected=finder.rejected)


__all__ = ["Decide", "EngineFailureError", "Quarantined", "Rejected", "describe", "engine_version", "search"]
