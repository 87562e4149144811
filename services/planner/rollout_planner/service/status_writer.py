"""When the status document is rebuilt, and its encoding kept off the path to a decision's commands.

The document walks the whole fleet (tens of ms at 10,000 clusters, more on a loaded core). It is
encoded only after the batch's commands are published, so no command waits for it, and it is
written with the mark that the outbox went out (one store write). Outside state changes it is
rebuilt at most `STATUS_SHARE` of the time, however short `status_interval_s` is, and so is the
catch-up of an idle planner: a planner between bursts of readiness is idle many times a second, and
at 300,000 clusters a catch-up each second took half a core. A stage or rollout transition or an
acknowledgement is described at once (STAT-1).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rollout_common.commands import Command
from rollout_planner.engine import EngineState
from rollout_planner.service.metrics import PlannerMetrics
from rollout_planner.service.status_document import encode_status

STATUS_SHARE = 0.05
_URGENT_KINDS = frozenset({"stage_transition", "rollout_transition", "command_ack"})


def changes_status(commands: Sequence[Command]) -> bool:
    """Stage and rollout transitions and acknowledgements must reach the status document at once."""
    return any(c.kind in _URGENT_KINDS for c in commands)


class StatusWriter:
    """The throttle of the status document: when it is due, what it cost, which batch it describes."""

    def __init__(
        self, *, interval_s: float, metrics: PlannerMetrics, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval_s = interval_s
        self._metrics = metrics
        self._monotonic = monotonic
        self._wall = float("-inf")
        self._cost = 0.0  # seconds the last document took to build
        self.described = -1  # the batch the last document described

    def due(self, batch: int, *, urgent: bool) -> bool:
        """Whether the batch just published is described now (a document describes each batch once).
        A document of batch 0 (the state as built, before any record: an idle planner's first poll
        writes it) holds back no other: the first batch's, with the fleet `rollout apply` just
        published, is written at once instead of a whole interval later."""
        if self.described >= batch:
            return False
        return urgent or self.described == 0 or self._spaced()

    def behind(self, batch: int) -> bool:
        """With nothing to decide: a document the throttle left behind is brought up to date, so a
        planner that has caught up never leaves `rollout status` describing an older batch. Spaced
        as any other rebuild: it comes within `interval_s` or 20 times the last build's cost."""
        return self.described < batch and self._spaced()

    def _spaced(self) -> bool:
        return self._monotonic() - self._wall >= max(self._interval_s, self._cost / STATUS_SHARE)

    def encode(self, state: EngineState, batch: int) -> bytes:
        started = self._monotonic()
        document = encode_status(state, batch=batch)
        self._cost = self._monotonic() - started
        self._wall = started
        return document

    def written(self, batch: int, document: bytes) -> None:
        self.described = batch
        self._metrics.observe_status(document)


__all__ = ["STATUS_SHARE", "StatusWriter", "changes_status"]
