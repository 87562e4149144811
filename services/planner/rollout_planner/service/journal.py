"""The decision journal: what each batch decided from, so a snapshot is needed only now and then.

Writing the whole engine snapshot after every batch costs time proportional to the fleet. The
engine is deterministic, so the planner instead journals each batch's events and `now` (small)
in the same atomic write as its checkpoint, and writes a full snapshot every so often. A
restart loads the last snapshot and replays the journal entries after it through `decide`,
reaching exactly the state that had been persisted (the restart tests prove the equivalence).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rollout_common.errors import PermanentError
from rollout_common.events import Event

JOURNAL_PREFIX = "planner/journal/"
SNAPSHOT_BATCH_KEY = "planner/snapshot-batch"


class JournalEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    batch: int
    now: float
    events: tuple[Event, ...]


def journal_key(batch: int) -> str:
    # zero-padded so that the store's sorted key listing is batch order
    return f"{JOURNAL_PREFIX}{batch:012d}"


def encode_entry(*, batch: int, now: float, events: list[Event]) -> bytes:
    return JournalEntry(batch=batch, now=now, events=tuple(events)).model_dump_json(by_alias=True).encode()


def decode_entry(data: bytes) -> JournalEntry:
    return JournalEntry.model_validate_json(data)


class JournalReplayError(PermanentError):
    """A journaled batch cannot be decided again at a restart (unreadable, or the engine raises on it):
    not a snapshot problem; the planner stops and says which batch (docs/operations.md)."""
