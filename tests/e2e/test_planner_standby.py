"""One planner at a time (BUS-8), as processes on the real broker and Redis.

Two planners start together on one namespace; one takes the lease, the other stands by. The
active one is SIGKILLed mid-rollout: the standby takes over (the takeover time is measured and
bounded) and the killed one, restarted, stands by. Then the new active one is SIGSTOPped: the
standby takes over, and the paused process, SIGCONTed afterwards, finds its lease gone, writes
nothing, decides nothing and goes back to standby. The audit reads the topics: no command id was
ever published with two different contents and no cluster was handed out twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from e2e_system import (
    Pace,
    apply_fleet,
    publish_release,
    read_until,
    settled,
    staged_cluster_names,
    staged_fleet,
    start_system,
    wait_for_fleet,
)
from service_processes import ServiceProcesses
from topic_reader import Message, read_to_end

from rollout_common.topics.catalog import PROGRESS, STAGE_ADVANCE

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
STAGES = ("dev", "staging", "prod")
PER_STAGE = 4
TIME_SCALE = 3600.0
# Long soaks (10 s of wall time) keep the rollout going through both faults.
SOAK_S = {"dev": 10 * 3600, "staging": 10 * 3600, "prod": 3600}
PACE = Pace(time_scale=TIME_SCALE, upgrade_s=0.5, max_concurrent=2, ready_after_s=0.3)
LEASE_TTL_S = 3.0  # e2e_system starts planners with this lease
# Lease TTL + a standby's retry + its restore and the Kafka group's rebalance, which waits out
# the session timeout (10 s) of a member that died or froze without leaving.
TAKEOVER_BOUND_S = 20.0
COMPLETE_TIMEOUT_S = 180.0


def scenario_document() -> dict[str, Any]:
    soaks = {stage: f"{SOAK_S[stage]}s" for stage in STAGES}
    return staged_fleet(name="standby", stages=STAGES, per_stage=PER_STAGE, version=OLD, soak=soaks, max_new=2)


def cluster_names() -> list[str]:
    return staged_cluster_names(STAGES, PER_STAGE)


class Lease:
    """Reads the planners' lease from Redis: which process holds it, under which epoch."""

    def __init__(self, redis_url: str, prefix: str) -> None:
        self._client = aioredis.Redis.from_url(redis_url)
        self._key = f"{prefix}:planner/lease"

    async def holder(self) -> tuple[int, int] | None:
        """(epoch, pid) of the holder; the owner is `<host>-<pid>-<random>`."""
        raw = await self._client.get(self._key)
        if raw is None:
            return None
        epoch, owner = raw.decode().split("/", 1)
        return int(epoch), int(owner.rsplit("-", 2)[1])

    async def wait_for(self, pid: int, *, timeout_s: float) -> int:
        async with asyncio.timeout(timeout_s):
            while True:
                held = await self.holder()
                if held is not None and held[1] == pid:
                    return held[0]
                await asyncio.sleep(0.05)

    async def close(self) -> None:
        await self._client.aclose()


def active_and_standby(services: ServiceProcesses, pid: int) -> tuple[str, str]:
    names = ("planner", "planner-b")
    active = next(name for name in names if services.running[name].pid == pid)
    return active, next(name for name in names if name != active)


def audit(advances: list[Message]) -> None:
    """No command id with two contents; no (cluster, track) in two commands (BUS-3, BUS-8)."""
    contents: dict[str, set[bytes]] = defaultdict(set)
    handed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in advances:
        command = json.loads(record.value)
        contents[command["commandId"]].add(record.value)
        for cluster in command["clusters"]:
            handed[(cluster, command["track"])].add(command["commandId"])
    assert {cid: len(v) for cid, v in contents.items() if len(v) > 1} == {}
    assert {key: sorted(ids) for key, ids in handed.items() if len(ids) > 1} == {}
    assert set(handed) == {(name, track) for name in cluster_names() for track in ("controlPlane", "nodes")}


def complete(records: list[Message]) -> bool:
    done = set()
    for record in records:
        event = json.loads(record.value)
        if event["kind"] == "stage_transition" and event["state"] == "COMPLETE":
            done.add((event["stage"], event["track"]))
    return len(done) == len(STAGES) * 2


async def wait_for_log(services: ServiceProcesses, name: str, text: str, *, timeout_s: float, after: int = 0) -> None:
    """Until `text` shows in the process's log past its first `after` characters."""
    async with asyncio.timeout(timeout_s):
        while True:
            if text in services.log_tail(name, 10_000_000)[after:]:
                return
            await asyncio.sleep(0.1)


async def test_bus_8_a_standby_takes_over_from_a_killed_and_from_a_paused_planner(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses
) -> None:
    apply_fleet(
        scenario_document(), tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    start_system(services, prefix=prefix, clusters=cluster_names(), pace=PACE)
    module_args, env = services._launches["planner"]  # the second planner: the same settings
    services.start("planner-b", module_args, env)
    lease = Lease(redis_url, prefix)
    try:
        await wait_for_fleet(redis_url, prefix, services, clusters=len(cluster_names()))
        first = await lease.holder()
        assert first is not None and first[0] == 1  # one of the two took it, once
        active, standby = active_and_standby(services, first[1])
        await wait_for_log(services, standby, "standby: another planner holds the lease", timeout_s=30)

        await publish_release(kafka_bootstrap, prefix, event_id="rel-standby", targets={"1.30": NEW})
        advance_topic = prefix + STAGE_ADVANCE.name
        await read_until(kafka_bootstrap, advance_topic, STAGE_ADVANCE.partitions, lambda r: len(r) >= 1, timeout_s=60)

        # 1. SIGKILL: the standby takes the lease once the TTL lapses, and decides.
        killed_at = time.monotonic()
        services.kill(active)
        epoch = await lease.wait_for(services.running[standby].pid, timeout_s=TAKEOVER_BOUND_S)
        lease_after_kill_s = time.monotonic() - killed_at
        assert epoch == 2
        await wait_for_log(services, standby, "planner started", timeout_s=TAKEOVER_BOUND_S)
        ready_after_kill_s = time.monotonic() - killed_at
        services.restart(active)  # comes back as a standby
        await wait_for_log(services, active, "standby: another planner holds the lease", timeout_s=30)
        active, standby = standby, active

        # 2. SIGSTOP: the standby takes over; the paused one, resumed, stops deciding.
        paused = services.running[active]
        paused_log_before = len(services.log_tail(active, 10_000_000))
        os.kill(paused.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            epoch = await lease.wait_for(services.running[standby].pid, timeout_s=TAKEOVER_BOUND_S)
            lease_after_pause_s = time.monotonic() - stopped_at
            assert epoch == 3
        finally:
            os.kill(paused.pid, signal.SIGCONT)
        await wait_for_log(services, active, "back to standby", timeout_s=30, after=paused_log_before)
        woke_log = services.log_tail(active, 10_000_000)[paused_log_before:]
        assert "lease lost" in woke_log
        # After it woke it decided nothing: no command logged, nothing persisted.
        assert '"stage_advance"' not in woke_log.split("lease lost", 1)[1].split("back to standby", 1)[0]
        assert (await lease.holder()) == (3, services.running[standby].pid)

        progress = await read_until(
            kafka_bootstrap, prefix + PROGRESS.name, PROGRESS.partitions, complete, timeout_s=COMPLETE_TIMEOUT_S
        )
        assert complete(progress)
        # the rollout completed, so every batch is on the topic; after the services settle, a
        # wrongly repeated one would be too
        await settled(kafka_bootstrap, prefix)
        audit(await read_to_end(kafka_bootstrap, advance_topic, partitions=STAGE_ADVANCE.partitions))
        assert services.exited() == {}, {n: services.log_tail(n) for n in services.exited()}
        # The figures the docs quote (docs/reliability.md).
        print(
            f"\ntakeover after SIGKILL: lease {lease_after_kill_s:.1f} s, deciding {ready_after_kill_s:.1f} s; "
            f"after SIGSTOP: lease {lease_after_pause_s:.1f} s"
        )
        assert lease_after_kill_s <= LEASE_TTL_S + 1.0
        assert lease_after_pause_s <= LEASE_TTL_S + 1.0
    finally:
        await lease.close()
