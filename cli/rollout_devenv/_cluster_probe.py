"""What the local Kafka cluster's nodes say about themselves over the protocol: which brokers the
controller counts as live, and each partition's leader, replicas and in-sync replicas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient

from rollout_devenv._probe import run_in_own_loop

_REQUEST_TIMEOUT_MS = 5000


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


async def _live_brokers(bootstrap: str) -> set[int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=_REQUEST_TIMEOUT_MS)
    try:
        await admin.start()
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return {int(broker["node_id"]) for broker in cluster["brokers"]}


def node_registered(bootstrap: str, node_id: int) -> bool:
    """True once the broker at `bootstrap` lists `node_id` as live (unfenced) in its metadata."""
    try:
        return node_id in run_in_own_loop(lambda: _live_brokers(bootstrap))
    except Exception:
        return False


async def _partitions(bootstrap: str, topics: Sequence[str]) -> dict[tuple[str, int], PartitionState]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=_REQUEST_TIMEOUT_MS)
    try:
        await admin.start()
        described = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    return {
        (topic["topic"], part["partition"]): PartitionState(
            leader=part["leader"], replicas=tuple(part["replicas"]), isr=tuple(part["isr"])
        )
        for topic in described
        for part in topic["partitions"]
    }


def describe_partitions(bootstrap: str, topics: Sequence[str]) -> dict[tuple[str, int], PartitionState]:
    """Every partition of `topics`, as the cluster's metadata has it now."""
    return run_in_own_loop(lambda: _partitions(bootstrap, topics))
