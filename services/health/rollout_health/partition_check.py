"""The monitor's start-up check of partition counts: its table must be co-partitioned with its input.

A worker owns heartbeat partitions, and the row of a cluster lives in the table's changelog
partition of the same number (`KeyPartitionedTable`). If the heartbeats topic, the settings and the
changelog disagree, a worker would judge heartbeats against rows another worker owns (a cluster
called stale while it reports, or kept ready while silent), so the monitor refuses to start and says
what to do instead.
"""

from __future__ import annotations

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.topics.catalog import HEARTBEATS
from rollout_common.topics.partitions import mismatch
from rollout_health.settings import MonitorSettings

TABLE_NAME = "cluster-health"


def changelog_topic(settings: MonitorSettings) -> str:
    """The table's changelog, named as faust names it: `<app id>-<table>-changelog`."""
    return f"{settings.group(settings.app_id)}-{TABLE_NAME}-changelog"


async def partition_problem(bus: KafkaBus, settings: MonitorSettings) -> str | None:
    """Why the monitor may not start with these topics, or None when the counts agree."""
    heartbeats = settings.topic_prefix + HEARTBEATS.name
    changelog = changelog_topic(settings)
    expected = settings.partitions(HEARTBEATS)
    counts = await bus.partition_counts([heartbeats, changelog])
    actual = counts.get(heartbeats)
    if actual is None:
        return None  # not created yet (create_topics off): faust creates it with the settings' count
    if actual != expected:
        return mismatch(heartbeats, expected=expected, actual=actual)
    table = counts.get(changelog)
    if table is None or table == actual:
        return None
    return (
        f"the monitor's table changelog {changelog} has {table} partitions but its heartbeats topic {heartbeats} "
        f"has {actual}: they must be equal. With every monitor worker stopped, delete the changelog "
        f"(kafka-topics.sh --delete --topic {changelog}) and start the monitor again; it rebuilds the rows "
        "from the next heartbeats (docs/operations.md, sizing)"
    )
