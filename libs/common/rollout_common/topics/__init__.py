"""Every Kafka topic: its name, message models, key, partition count and retention (BUS-2).

One module per topic keeps what travels on it in one place; `ALL` lists them for topic creation,
schema export and docs.
"""

from rollout_common.topics.catalog import ALL, TopicDef, by_name

__all__ = ["ALL", "TopicDef", "by_name"]
