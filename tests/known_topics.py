"""Topics created through the project's bus and waited for in the broker's metadata, for tests that
judge topics right after making them (a topic made a moment ago is not in every broker's view yet).
Shared by every test folder (tests/ is on the path)."""

from __future__ import annotations

import asyncio

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.ports import TopicSpec


async def known_topics(bootstrap: str, specs: list[TopicSpec]) -> None:
    """Created, and in the broker's metadata with their partition counts."""
    bus = KafkaBus(bootstrap, client_id="test-setup")
    try:
        await bus.ensure_topics(specs)
        wanted = {spec.name: spec.partitions for spec in specs}
        async with asyncio.timeout(30):
            while True:
                if await bus.partition_counts(list(wanted)) == wanted:
                    break
                await asyncio.sleep(0.05)
    finally:
        await bus.close()
