"""The messages a decision produces, encoded once so a re-publish after a crash is byte-identical.

CloudEvents ids are deterministic: a StageAdvance carries its command id (executors dedupe on
it), everything else `<source>:<batch>:<position>`, so the same decision re-published gets the
same ids and any consumer can drop the duplicate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from rollout_common import envelope
from rollout_common.commands import Command, StageAdvance, WakeAt
from rollout_common.dead_letters import dead_letter
from rollout_common.ports import Record
from rollout_common.topics.catalog import DEAD_LETTER, PROGRESS, STAGE_ADVANCE, TopicDef


class OutboxMessage(BaseModel):
    """One message to publish; bytes travel as base64 in the checkpoint's JSON."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    topic: str
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]


class Outbox:
    """Builds the outbox of one batch: topic names with the configured prefix, ids by position."""

    def __init__(self, *, prefix: str, source: str, batch: int, at: float) -> None:
        self._prefix = prefix
        self._source = source
        self._batch = batch
        self._at = at
        self.messages: list[OutboxMessage] = []

    def add_commands(self, commands: Sequence[Command]) -> None:
        for command in commands:
            if isinstance(command, WakeAt):
                continue  # a timer for this process, kept in the checkpoint, not a message
            if isinstance(command, StageAdvance):
                self._add(STAGE_ADVANCE, command, event_id=command.command_id)
            event_id = command.command_id if isinstance(command, StageAdvance) else self._next_id()
            self._add(PROGRESS, command, event_id=event_id)

    def add_dead_letter(self, record: Record, reason: str, *, extra: Mapping[str, str] | None = None) -> None:
        """BUS-4: the original value and key, its headers, and where it came from and why (`extra`: more `dlq_*`)."""
        value, headers = dead_letter(record, reason=reason, source=self._source, extra=extra)
        self.messages.append(
            OutboxMessage(topic=self._prefix + DEAD_LETTER.name, key=record.key, value=value, headers=headers)
        )

    def _add(self, topic: TopicDef, command: Command, *, event_id: str) -> None:
        value, headers = envelope.encode(
            command, event_id=event_id, source=self._source, at=self._at, subject=_subject(command)
        )
        key = topic.key(command).encode()
        self.messages.append(OutboxMessage(topic=self._prefix + topic.name, key=key, value=value, headers=headers))

    def _next_id(self) -> str:
        return f"{self._source}:{self._batch}:{len(self.messages)}"


def _subject(command: Command) -> str | None:
    """The rollout a message is about, so subscribers can filter without parsing the body."""
    rollout_id = getattr(command, "rollout_id", None)
    return rollout_id if isinstance(rollout_id, str) else None
