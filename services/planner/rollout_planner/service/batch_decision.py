"""One poll's records turned into a decision: decoded, put in decision order, decided by the engine.

Records the stored state already holds (offset below the checkpoint's) are skipped; undecodable
ones become dead letters in the batch's outbox (BUS-4); the rest are one `EventBatch`. The
checkpoint's offsets advance past every record taken, decoded or not.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics
from rollout_common.commands import Command, StageAdvance, WakeAt
from rollout_common.errors import InvalidInputError
from rollout_common.events import Event, EventBatch
from rollout_common.ports import Record
from rollout_planner.engine import EngineState
from rollout_planner.service.checkpoint import Checkpoint
from rollout_planner.service.intake import Intake
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.outbox import Outbox
from rollout_planner.service.quarantine import Decide

log = logging.getLogger("rollout.planner")


@dataclass
class Taken:
    """One poll decoded: `new` the records the stored state does not hold yet."""

    records: Sequence[Record]
    new: list[Record] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    origin: dict[int, Record] = field(default_factory=dict)
    refused: list[tuple[Record, str]] = field(default_factory=list)


class BatchDecision:
    """Decodes and decides; `origin` maps each event of the current batch to its record (BUS-9)."""

    def __init__(
        self,
        *,
        intake: Intake,
        decide: Decide,
        metrics: PlannerMetrics,
        dead_letters: DeadLetterMetrics,
        source: str,
    ) -> None:
        self.intake = intake
        self._decide = decide
        self._metrics = metrics
        self._dead_letters = dead_letters
        self._source = source
        self.origin: dict[int, Record] = {}

    def decode(self, records: Sequence[Record], checkpoint: Checkpoint, *, now: float) -> Taken:
        """The records' events and refusals; the checkpoint is not touched, so a poll may be decoded
        while the batch before it is still being written."""
        taken = Taken(records=records)
        duplicates = 0
        for new, record in checkpoint.not_applied(records):
            if new:
                taken.new.append(record)
            else:
                duplicates += 1
        if duplicates:
            self._metrics.duplicates_skipped.inc(duplicates)
        for record, outcome in zip(taken.new, self.intake.decode_many(taken.new, now=now), strict=True):
            if isinstance(outcome, InvalidInputError):
                taken.refused.append((record, str(outcome)))
            else:
                taken.events.append(outcome)
                taken.origin[id(outcome)] = record
        return taken

    def admit(self, taken: Taken, checkpoint: Checkpoint, outbox: Outbox) -> list[Event]:
        """The batch's events: its refusals go to the outbox as dead letters (BUS-4), and the
        checkpoint's offsets move past every new record, decoded or not."""
        self.origin = taken.origin
        for record, reason in taken.refused:
            outbox.add_dead_letter(record, reason)
            self._metrics.dead_letters.inc()
            self._dead_letters.record(record, reason=reason, source=self._source)
        checkpoint.advance_past(taken.new)
        return list(taken.events)

    def decide(self, state: EngineState, events: list[Event], now: float) -> list[Command]:
        started = time.perf_counter()
        # Built, not validated: each event is a model its decoder (or the journal) validated, and
        # checking them again against the union of event types cost 0.3 to 0.5 µs an event.
        _, commands = self._decide(state, EventBatch.model_construct(events=tuple(events)), now)
        self._metrics.decision_seconds.observe(time.perf_counter() - started)
        # one counter update per kind, not per event: a label lookup costs about as much as decoding
        for kind, count in collections.Counter(event.kind for event in events).items():
            self._metrics.events_applied.labels(kind=kind).inc(count)
        self._metrics.batches_emitted.inc(sum(isinstance(c, StageAdvance) for c in commands))
        self._metrics.observe_commands(commands)
        return commands


def follow_timer(checkpoint: Checkpoint, commands: Sequence[Command]) -> None:
    # One timer: the latest WakeAt replaces any earlier one.
    for command in commands:
        if isinstance(command, WakeAt):
            checkpoint.wake_at = command.at


def log_commands(commands: Sequence[Command], batch: int) -> None:
    for command in commands:
        if isinstance(command, WakeAt):
            continue
        # Under one key: a command's own field names (message, ...) must not clash with the
        # LogRecord's; the rollout id stays top level so logs can be filtered by it.
        rollout_id = getattr(command, "rollout_id", None)
        details = command.model_dump(mode="json", by_alias=True, exclude={"kind"})
        log.info(command.kind, extra={"batch": batch, "rollout_id": rollout_id, "command": details})


__all__ = ["BatchDecision", "Taken", "follow_timer", "log_commands"]
