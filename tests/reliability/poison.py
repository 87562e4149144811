"""An engine that raises on one kind of event, composed into a planner the way the service composes
its engine (the `decide` argument): what a planner does with an event it cannot apply (BUS-9)."""

from __future__ import annotations

from rollout_common.commands import Command
from rollout_common.events import Event, EventBatch
from rollout_planner.engine import EngineState
from rollout_planner.engine import decide as engine_decide

POISON = "poison"
RAISED = "PoisonError: cannot apply an event naming poison"


class PoisonError(Exception):
    """What an engine raises on an event it cannot apply."""


def poisoned_decide(state: EngineState, event: Event | EventBatch, now: float) -> tuple[EngineState, list[Command]]:
    """The engine, except that an event naming `poison` makes it raise, after the batch's other
    events have changed the state in place, as an engine failing halfway through would."""
    events = event.events if isinstance(event, EventBatch) else (event,)
    good = tuple(e for e in events if POISON not in e.model_dump_json())
    if len(good) < len(events):
        engine_decide(state, EventBatch(events=good), now)
        raise PoisonError("cannot apply an event naming poison")
    return engine_decide(state, event, now)


def poison_reason(kind: str) -> str:
    """The dead-letter reason of a set-aside event of this kind."""
    return f"quarantined: the planner's decision raised {RAISED} on this {kind} event (BUS-9)"
