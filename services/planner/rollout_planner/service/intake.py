"""Records in, engine events out: the only place that knows which topics feed the planner.

Within one poll batch the events are put in a fixed order of kinds (inventory, upgrade
results, readiness, operator commands, release targets), each kind keeping its arrival order:
the batch is one instant, and at one instant the planner should decide on the fleet as it is
known at that instant, so an inventory change polled with a release target is applied first
whatever partition order the broker returned. Upgrade results go before readiness because a
cluster reports ready after its upgrade finished: a `ready` polled together with the
`succeeded` it follows must not be applied first, or the cluster would wait for the next
heartbeat to count as available again.

A time an event carries (a readiness observation, an upgrade's end) more than `max_future_skew_s`
ahead of the planner is refused here, with the reason (BUS-4, BUS-7): applied, it would make every
later real observation of the cluster look older, for good. Such times are stamped by other hosts'
wall clocks, and the engine's clock may run ahead of the wall (a sped-up demo) or be a test's: a time
is ahead only when it is ahead of both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from pydantic import BaseModel

from rollout_common import envelope
from rollout_common.epoch import MAX_FUTURE_SKEW_S, check_not_ahead
from rollout_common.errors import InvalidInputError
from rollout_common.events import Event
from rollout_common.ports import Record
from rollout_common.topics.catalog import (
    CHECK_RESULTS,
    INVENTORY,
    OPERATOR_COMMANDS,
    READINESS,
    RELEASE_TARGETS,
    UPGRADE_RESULTS,
    TopicDef,
)

INPUT_TOPICS: tuple[TopicDef, ...] = (
    INVENTORY,
    READINESS,
    UPGRADE_RESULTS,
    CHECK_RESULTS,
    OPERATOR_COMMANDS,
    RELEASE_TARGETS,
)
_KIND_ORDER = {"inventory": 0, "upgrade_result": 1, "readiness": 2, "operator_command": 3}
_LAST = 4


class Intake:
    def __init__(
        self, *, prefix: str, max_future_skew_s: float = MAX_FUTURE_SKEW_S, wall: Callable[[], float] = time.time
    ) -> None:
        self._by_topic = {prefix + topic.name: topic for topic in INPUT_TOPICS}
        self._skew_s = max_future_skew_s
        self._wall = wall

    @property
    def topics(self) -> list[str]:
        return list(self._by_topic)

    def decode(self, record: Record, *, now: float) -> Event:
        """The record's event; InvalidInputError's text is the dead-letter reason. `now`: engine time."""
        outcome = self.decode_many([record], now=now)[0]
        if isinstance(outcome, InvalidInputError):
            raise outcome
        return outcome

    def decode_many(self, records: Sequence[Record], *, now: float) -> list[Event | InvalidInputError]:
        """`decode` of each record, in order, a refusal returned as its error (its text is the
        dead-letter reason): a poll's records of one topic are decoded together
        (`envelope.decode_events`). The wall clock is read once for them all."""
        by_topic: dict[str, list[int]] = {}
        for index, record in enumerate(records):
            by_topic.setdefault(record.topic, []).append(index)
        latest = max(now, self._wall())
        outcomes: list[Event | InvalidInputError | None] = [None] * len(records)
        for name, indexes in by_topic.items():
            topic = self._by_topic.get(name)
            if topic is None:
                refusal = InvalidInputError(f"topic {name!r} does not feed the planner")
                for index in indexes:
                    outcomes[index] = refusal
                continue
            decoded = envelope.decode_events([(records[i].value, records[i].headers) for i in indexes], topic.models)
            for index, outcome in zip(indexes, decoded, strict=True):
                outcomes[index] = self._not_ahead(outcome, latest)
        return cast("list[Event | InvalidInputError]", outcomes)

    def _not_ahead(self, model: BaseModel | InvalidInputError, latest: float) -> Event | InvalidInputError:
        """The event, or the refusal of a time it carries too far ahead (a refusal passes through)."""
        if isinstance(model, InvalidInputError):
            return model
        try:
            check_not_ahead(model, now=latest, skew_s=self._skew_s, reader="planner", setting="max_future_skew_s")
        except InvalidInputError as exc:
            return exc
        return model  # type: ignore[return-value]  # every input topic carries engine events only


def in_decision_order(events: Sequence[Event]) -> list[Event]:
    return sorted(events, key=lambda event: _KIND_ORDER.get(event.kind, _LAST))
