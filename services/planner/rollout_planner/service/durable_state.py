"""The engine state in the store: restored at a term's start, journalled per batch, compacted into a
full snapshot every so often.

A batch's journal entry and its checkpoint go in ONE atomic write, so the offsets always say which
records the stored state holds and the outbox what it still has to publish. A restart loads the
last full snapshot and decides the journalled batches again (see `journal`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rollout_common.errors import PermanentError
from rollout_common.events import Event, EventBatch
from rollout_common.ports import Store
from rollout_planner.engine import EngineState
from rollout_planner.engine import snapshot as engine_snapshot
from rollout_planner.service.checkpoint import (
    CHECKPOINT_KEY,
    PUBLISHED_KEY,
    SNAPSHOT_KEY,
    Checkpoint,
    IncompatibleSnapshotError,
)
from rollout_planner.service.journal import (
    ENGINE_VERSION,
    GAP_REMEDY,
    SNAPSHOT_BATCH_KEY,
    JournalGapError,
    JournalReplayError,
    decode_entry,
    encode_entry,
    journal_key,
)
from rollout_planner.service.lease_keeper import PlannerLease
from rollout_planner.service.quarantine import Decide, describe, engine_version
from rollout_planner.service.retrying import Retrier
from rollout_planner.service.settings import PlannerSettings

log = logging.getLogger("rollout.planner")


@dataclass
class Restored:
    state: EngineState
    checkpoint: Checkpoint
    published: int


class DurableState:
    """One term's view of the store; `snapshot_batch`: the batch of the last full snapshot."""

    def __init__(
        self, *, store: Store, lease: PlannerLease, settings: PlannerSettings, retrier: Retrier, decide: Decide
    ) -> None:
        self._store = store
        self._lease = lease
        self._settings = settings
        self._retrier = retrier
        self._decide = decide
        self.snapshot_batch = 0
        self._snapshot_wall = time.monotonic()

    async def load(self) -> Restored | None:
        """The stored state brought up to its checkpoint; None when the store holds none yet."""
        snapshot, checkpoint, published = await self._retrier.call(
            "read the snapshot", lambda: self._store.get_many([SNAPSHOT_KEY, CHECKPOINT_KEY, PUBLISHED_KEY])
        )
        if snapshot is None or checkpoint is None:
            return None
        try:
            state = engine_snapshot.load(snapshot)
            restored = Restored(state, Checkpoint.model_validate_json(checkpoint), int(published or 0))
            await self._replay_journal(state, restored.checkpoint)
        except (ValueError, KeyError, TypeError) as exc:  # JSON and pydantic errors are ValueErrors
            raise IncompatibleSnapshotError(
                f"the stored snapshot ({self._settings.redis_namespace}:{SNAPSHOT_KEY}) cannot be loaded: "
                f"{str(exc).splitlines()[0]}"
            ) from exc
        return restored

    async def stored_state(self, checkpoint: Checkpoint) -> EngineState:
        """The state before the current batch, as a restart would rebuild it: snapshot plus journal."""
        snapshot = await self._retrier.call("read the snapshot", lambda: self._store.get(SNAPSHOT_KEY))
        if snapshot is None:
            where = f"{self._settings.redis_namespace}:{SNAPSHOT_KEY}"
            raise PermanentError(f"no stored snapshot ({where}) to rebuild the state from")
        state = engine_snapshot.load(snapshot)
        await self._replay_journal(state, checkpoint)
        return state

    def journal_items(self, checkpoint: Checkpoint, events: list[Event], *, now: float) -> dict[str, bytes]:
        """The batch's journal entry and checkpoint: small whatever the fleet size."""
        batch = checkpoint.batch
        return {
            journal_key(batch): encode_entry(batch=batch, now=now, events=events),
            CHECKPOINT_KEY: checkpoint.model_dump_json().encode(),
        }

    async def write(self, items: dict[str, bytes], *, doing: str) -> None:
        await self._retrier.call(doing, lambda: self._lease.put_many(items))

    def snapshot_due(self, batch: int) -> bool:
        return (
            batch - self.snapshot_batch >= self._settings.snapshot_every_batches
            or time.monotonic() - self._snapshot_wall >= self._settings.snapshot_interval_s
        )

    async def write_snapshot(
        self, state: EngineState, checkpoint: Checkpoint, *, also: dict[str, bytes] | None = None
    ) -> None:
        """A full snapshot at the checkpoint's batch (with `also`'s items); the journal entries it
        makes unnecessary go in the same atomic write."""
        batch = checkpoint.batch
        items = {
            **(also or {}),
            SNAPSHOT_KEY: engine_snapshot.dump(state),
            SNAPSHOT_BATCH_KEY: str(batch).encode(),
            CHECKPOINT_KEY: checkpoint.model_dump_json().encode(),
        }
        trimmed = [journal_key(old) for old in range(self.snapshot_batch, batch + 1)]
        await self._retrier.call("write the snapshot", lambda: self._lease.put_many(items, delete=trimmed))
        self.snapshot_batch, self._snapshot_wall = batch, time.monotonic()

    async def _replay_journal(self, state: EngineState, checkpoint: Checkpoint) -> None:
        """Bring a loaded snapshot up to the checkpoint by deciding the journalled batches again."""
        raw_batch = await self._retrier.call("read the snapshot batch", lambda: self._store.get(SNAPSHOT_BATCH_KEY))
        base = int(raw_batch) if raw_batch is not None else checkpoint.batch
        self.snapshot_batch = base
        wanted = list(range(base + 1, checkpoint.batch + 1))
        stored = await self._retrier.call(
            "read the journal", lambda: self._store.get_many([journal_key(b) for b in wanted])
        )
        missing = [b for b, data in zip(wanted, stored, strict=True) if data is None]
        if missing:
            raise JournalGapError(
                f"the journal misses {len(missing)} batch(es) from {missing[0]} to {missing[-1]} between the "
                f"snapshot (batch {base}) and the checkpoint (batch {checkpoint.batch}): {GAP_REMEDY}"
            )
        for batch, data in zip(wanted, stored, strict=True):
            self._replay_entry(state, batch, data)  # type: ignore[arg-type]  # none is missing
        if wanted:
            log.info("replayed the journal", extra={"from_batch": base + 1, "to_batch": checkpoint.batch})

    def _replay_entry(self, state: EngineState, batch: int, data: bytes) -> None:
        """Decide one journalled batch again; a failure is reported as the journal's, not the snapshot's."""
        try:
            entry = decode_entry(data)
        except ValueError as exc:
            raise JournalReplayError(
                f"the journal entry of batch {batch} cannot be read ({describe(exc)}); it was written by another "
                "version of the planner, or damaged: see 'Journal replay failed' in docs/operations.md"
            ) from exc
        if entry.engine_version != ENGINE_VERSION:
            log.warning(
                "replaying a batch another engine version decided",
                extra={"batch": batch, "written_by": entry.engine_version, "replayed_by": ENGINE_VERSION},
            )
        try:
            self._decide(state, EventBatch(events=entry.events), entry.now)
        except Exception as exc:
            raise JournalReplayError(
                f"replaying the journal's batch {batch} raised {describe(exc)} in engine {engine_version()}: this "
                "engine cannot apply events an earlier planner applied; see 'Journal replay failed' in "
                "docs/operations.md"
            ) from exc


__all__ = ["DurableState", "Restored"]
