"""A service's look at the topics it reads, at start: partitions and replication against its settings.

A planner or executor reading a topic with other partitions than the settings say still works, but
the deployment is not the one planned (more executors than partitions idle; the monitor's, sized
from the same map, refuses to start), and a topic replicated below the settings loses records with
a broker. Each finding is one log line that says what to do; the service goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.connection_settings import ServiceSettings
from rollout_common.errors import PermanentError
from rollout_common.ports import Bus
from rollout_common.topics.catalog import TopicDef
from rollout_common.topics.partitions import mismatch

log = logging.getLogger("rollout.topics")


async def read_topic_problems(bus: Bus, settings: ServiceSettings, topics: Sequence[TopicDef]) -> list[str]:
    """One line per topic of `topics` that differs from the settings; a topic not created yet is not
    judged (it is created with the settings), nor is a bus without a broker."""
    if not isinstance(bus, KafkaBus):
        return []
    expected = {settings.topic_prefix + topic.name: settings.partitions(topic) for topic in topics}
    counts = await bus.partition_counts(list(expected))
    problems = [
        mismatch(name, expected=wanted, actual=counts[name])
        for name, wanted in expected.items()
        if name in counts and counts[name] != wanted
    ]
    short = await bus.replication_shortfall([name for name in expected if name in counts])
    problems += [
        f"topic {line} is below the settings' replication: raise it with kafka-reassign-partitions.sh (and "
        "kafka-configs.sh for min.insync.replicas) or lower ROLLOUT_KAFKA_REPLICATION_FACTOR to what the "
        "cluster has"
        for line in short
    ]
    return problems


async def check_read_topics(bus: Bus, settings: ServiceSettings, topics: Sequence[TopicDef], *, reader: str) -> None:
    """Log what `read_topic_problems` finds; transient failures propagate (the caller retries)."""
    try:
        problems = await read_topic_problems(bus, settings, topics)
    except PermanentError as exc:  # a principal allowed to read but not to describe: the check is advice
        log.warning("%s: the topics it reads could not be checked against the settings: %s", reader, exc)
        return
    for problem in problems:
        log.error("%s: %s", reader, problem)


__all__ = ["check_read_topics", "read_topic_problems"]
