"""Sending a record that cannot be handled to the dead-letter topic, with the reason (BUS-4)."""

from __future__ import annotations

from rollout_common.dead_letters import dead_letter as dead_letter_record
from rollout_common.ports import Bus, Record
from rollout_executor.retry import retried


async def dead_letter(bus: Bus, *, topic: str, record: Record, reason: str, source: str) -> None:
    """Publish the record unchanged, its origin and `reason` in `dlq_*` headers."""
    value, headers = dead_letter_record(record, reason=reason, source=source)
    await retried(
        lambda: bus.publish(topic, key=record.key, value=value, headers=headers),
        what=f"dead-letter {record.topic}/{record.partition}@{record.offset}",
    )
