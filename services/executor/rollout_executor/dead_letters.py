"""Sending a record that cannot be handled to the dead-letter topic, with the reason (BUS-4)."""

from __future__ import annotations

from rollout_common.ports import Bus, Record
from rollout_executor.retry import retried


async def dead_letter(bus: Bus, *, topic: str, record: Record, reason: str, source: str) -> None:
    """Publish the record unchanged, its origin and `reason` in `dlq_*` headers."""
    headers = dict(record.headers)
    headers.update(
        {
            "dlq_reason": reason.encode(errors="replace"),
            "dlq_topic": record.topic.encode(),
            "dlq_partition": str(record.partition).encode(),
            "dlq_offset": str(record.offset).encode(),
            "dlq_source": source.encode(),
        }
    )
    await retried(
        lambda: bus.publish(topic, key=record.key, value=record.value, headers=headers),
        what=f"dead-letter {record.topic}/{record.partition}@{record.offset}",
    )
