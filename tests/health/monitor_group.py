"""Health monitor workers in one consumer group on the real broker, as the takeover and multi-worker
tests drive them: a cluster name on every heartbeat partition, waiting until the group is stable,
a heartbeat record, and stopping the worker processes that are left."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient

from rollout_adapters.memory_bus import kafka_partition
from rollout_common.envelope import encode
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import HEARTBEATS


def one_per_partition(stem: str) -> list[str]:
    """A cluster name on each heartbeat partition, so every worker owns some."""
    names: dict[int, str] = {}
    i = 0
    while len(names) < HEARTBEATS.partitions:
        name = f"{stem}-{i}"
        names.setdefault(kafka_partition(name.encode(), HEARTBEATS.partitions), name)
        i += 1
    return [names[p] for p in sorted(names)]


async def group_has(kafka_bootstrap: str, group: str, members: int, timeout_s: float) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:  # no event to wait on: ask the broker until the group is stable with them all
                with contextlib.suppress(Exception):
                    for response in await admin.describe_consumer_groups([group]):
                        for described in response.groups:
                            if described[2] == "Stable" and len(described[5]) == members:
                                return
                await asyncio.sleep(0.3)
    finally:
        await admin.close()


def heartbeat_record(cluster: str, now: float) -> tuple[bytes, list[tuple[str, bytes]]]:
    """A ready heartbeat observed at `now`: its value and its headers, as a producer sends them."""
    value, headers = encode(
        Heartbeat(cluster=cluster, ready=True, observed_at=now, reporter="test"),
        event_id=f"{cluster}-{now}",
        source="test",
        at=now,
    )
    return value, list(headers.items())


def stop_workers(processes: Iterable[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to the survivors, then SIGKILL to the process group of any that does not stop."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
