"""The topics faust makes for itself, which the supervisor creates first with the settings.

faust creates its table's changelog and its leader-election topic with its replication factor but
none of the topic configs the services set, so on a three-broker cluster they came out with the
broker's `min.insync.replicas` (1): an acknowledged row of the table then lived on one broker only.
A topic that exists already is left as it is by faust, so creating both beforehand, as every other
topic is created, gives them the configured replication and `min.insync.replicas`.
"""

from __future__ import annotations

from rollout_common.ports import TopicSpec
from rollout_common.topics.catalog import HEARTBEATS
from rollout_health.partition_check import changelog_topic
from rollout_health.settings import MonitorSettings


def leader_topic(settings: MonitorSettings) -> str:
    """faust's leader-election topic, named as faust names it: `<app id>-__assignor-__leader`."""
    return f"{settings.group(settings.app_id)}-__assignor-__leader"


def faust_topic_specs(settings: MonitorSettings) -> list[TopicSpec]:
    """The changelog (compacted, co-partitioned with the heartbeats) and the one-partition leader topic."""
    return [
        TopicSpec(name=changelog_topic(settings), partitions=settings.partitions(HEARTBEATS), compacted=True),
        TopicSpec(name=leader_topic(settings), partitions=1),
    ]


def changelog_configs(settings: MonitorSettings) -> dict[str, str]:
    """What faust adds to the changelog when it creates it itself (a worker run without the
    supervisor): the configured `min.insync.replicas`, where it is above the broker's default."""
    if settings.kafka_min_insync_replicas > 1:
        return {"min.insync.replicas": str(settings.kafka_min_insync_replicas)}
    return {}
