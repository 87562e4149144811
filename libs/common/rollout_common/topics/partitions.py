"""Partition counts as settings: the catalog's defaults, overridden per topic by name.

A topic's partition count bounds how many members of a consumer group share its work (the health
monitor's workers on the heartbeats, the executors on the stage advances), so a deployment sizes it
for its fleet: `ROLLOUT_TOPIC_PARTITIONS='{"rollout.cluster-heartbeats": 32}'`. Every service of a
deployment must be given the same map: topics are created with it, and a service checks the topics
it reads against it at start (`mismatches`).
"""

from __future__ import annotations

from collections.abc import Mapping

from rollout_common.topics.catalog import ALL, TopicDef

# Kafka's own limit per topic is far higher; beyond this a typo (an extra zero) is more likely
# than a plan, and each partition costs the broker file handles and memory.
MAX_PARTITIONS = 4096


def checked_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """The map as given, once every name is a catalog topic and every count is in 1..MAX_PARTITIONS."""
    names = {topic.name for topic in ALL}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ValueError(f"unknown topic(s) {unknown}: partitions are set by catalog name, one of {sorted(names)}")
    for name, count in overrides.items():
        if not 1 <= count <= MAX_PARTITIONS:
            raise ValueError(f"{name}: {count} partitions; a topic has 1 to {MAX_PARTITIONS}")
    return dict(overrides)


def partitions_of(topic: TopicDef, overrides: Mapping[str, int]) -> int:
    return overrides.get(topic.name, topic.partitions)


def mismatch(topic: str, *, expected: int, actual: int) -> str:
    """What an operator reads when a topic's partitions are not the configured ones, and what to do."""
    if actual < expected:
        grow = (
            f"grow the topic (kafka-topics.sh --alter --topic {topic} --partitions {expected}; "
            "see docs/operations.md, sizing) or "
        )
    else:
        grow = ""  # Kafka cannot take partitions away
    return (
        f"topic {topic} has {actual} partitions but the settings say {expected}: {grow}set "
        f"ROLLOUT_TOPIC_PARTITIONS to map it to {actual} in every service of this deployment"
    )
