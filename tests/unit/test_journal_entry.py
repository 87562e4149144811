"""A batch's journal entry (BUS-6) is written from the events as decoded, without validating them
again, and reads back to the same events; the bytes are those the validated entry gives."""

from __future__ import annotations

import pytest

from rollout_common.events import (
    Event,
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    UpgradeResult,
    WakeUp,
)
from rollout_common.status import Track
from rollout_planner.service.journal import ENGINE_VERSION, JournalEntry, decode_entry, encode_entry

EVENTS: list[Event] = [
    ReleaseTarget(event_id="r1", channel="regular", targets={"1.30": "1.31.13-gke.1023000"}),
    Readiness(cluster="c-1", ready=True, observed_at=1_700_000_000.5),
    Readiness(cluster="c-2", ready=False, reason="node pressure"),
    UpgradeResult(
        command_id="cmd-1", cluster="c-1", track=Track.NODES, version="1.31.13-gke.1023000", outcome="succeeded"
    ),
    InventoryChange(action="remove", name="c-9"),
    OperatorCommand(command_id="op-1", action="pause", rollout_id="r-1"),
    WakeUp(),
    Readiness(cluster='c-"quoted" \\ "events":[]', ready=True, node_version="1.31.13-gke.1023000"),
]


@pytest.mark.parametrize("now", [1_700_000_100.25, 1_700_000_100])
def test_the_entry_is_the_validated_entrys_bytes_and_reads_back_to_its_events(now: float) -> None:
    encoded = encode_entry(batch=7, now=now, events=EVENTS)
    validated = JournalEntry(batch=7, now=now, events=tuple(EVENTS), engine_version=ENGINE_VERSION)
    assert encoded == validated.model_dump_json(by_alias=True).encode()
    entry = decode_entry(encoded)
    assert (entry.batch, entry.now, entry.events, entry.engine_version) == (7, now, tuple(EVENTS), ENGINE_VERSION)
    assert isinstance(entry.now, float)


def test_an_entry_without_events_is_the_validated_entrys_bytes() -> None:
    validated = JournalEntry(batch=3, now=5.0, events=(), engine_version=ENGINE_VERSION)
    assert encode_entry(batch=3, now=5.0, events=[]) == validated.model_dump_json(by_alias=True).encode()
