"""The replication warning judges only what the cluster answered (BUS-3, BUS-6).

A broker that has not yet applied a topic created a moment ago answers DescribeConfigs for it with
error 3 (unknown topic) and no values, as the three-node cluster does for a topic it does not know.
That answer was read as the broker's default `min.insync.replicas` of 1, so the services warned,
at start, about the topics they had just created with 2 (the heartbeats and readiness topics of
the monitor, faust's changelog), though the cluster holds them with 2.
"""

from __future__ import annotations

from aiokafka.protocol.admin import DescribeConfigsResponse_v2  # type: ignore[import-untyped]

from rollout_adapters.kafka_bus import _min_isr_by_topic, shortfall

UNKNOWN_TOPIC = 3
TOPIC = 2  # the resource type


def configs_answer() -> DescribeConfigsResponse_v2:
    """A topic the answering broker knows with min.insync.replicas 1, and one it does not know yet."""
    entry = ("min.insync.replicas", "1", False, 5, False, [])
    return DescribeConfigsResponse_v2(
        throttle_time_ms=0,
        resources=[(0, "", TOPIC, "made-by-hand", [entry]), (UNKNOWN_TOPIC, "", TOPIC, "just-created", [])],
    )


def test_a_topic_the_broker_answered_with_an_error_has_no_min_insync_replicas() -> None:
    assert _min_isr_by_topic([configs_answer()]) == {"made-by-hand": 1}


def test_only_the_topics_the_cluster_described_are_judged() -> None:
    short = shortfall(
        ["made-by-hand", "just-created", "fine"],
        replicas={"made-by-hand": 1, "fine": 3},
        min_isr={**_min_isr_by_topic([configs_answer()]), "fine": 2},
        replication_factor=3,
        min_insync_replicas=2,
    )
    assert short == ["made-by-hand: 1 replicas, min.insync.replicas 1"]
