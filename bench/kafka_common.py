"""What the Kafka benchmarks share: a broker and Redis, fresh topic prefixes, fast producing, timers.

`infrastructure()` uses `KAFKA_BOOTSTRAP` / `REDIS_URL` when given (the test session's, or a
broker someone runs), otherwise starts a local broker and redis-server through `rollout_devenv`
(no Docker) and stops them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from pydantic import BaseModel

from rollout_common import envelope
from rollout_devenv import stop_processes

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Infra:
    bootstrap: str
    redis_url: str
    origin: str  # "given" or "local (rollout_devenv)"


@contextlib.contextmanager
def infrastructure(bootstrap: str | None = None, redis_url: str | None = None) -> Iterator[Infra]:
    bootstrap = bootstrap or os.environ.get("KAFKA_BOOTSTRAP")
    redis_url = redis_url or os.environ.get("REDIS_URL")
    if bootstrap and redis_url:
        yield Infra(bootstrap, redis_url, "given")
        return
    from rollout_devenv.kafka import KafkaBroker
    from rollout_devenv.redis import RedisServer

    broker = KafkaBroker() if not bootstrap else None
    redis = RedisServer() if not redis_url else None
    try:
        if broker is not None:
            broker.start()
            bootstrap = broker.bootstrap
        if redis is not None:
            redis.start()
            redis_url = redis.url
        assert bootstrap and redis_url
        yield Infra(bootstrap, redis_url, "local (rollout_devenv)")
    finally:
        if redis is not None:
            redis.stop()
        if broker is not None:
            broker.stop()


def fresh_prefix(what: str) -> str:
    """A topic prefix / Redis namespace no earlier run used: every run starts from empty topics."""
    return f"bench-{what}-{uuid.uuid4().hex[:8]}."


PACE_EVERY = 50  # a paced producer sleeps off its lead every this many messages


async def produce_all(
    bootstrap: str,
    topic: str,
    messages: Iterable[tuple[bytes, bytes, dict[str, bytes]]],
    *,
    window: int = 5_000,
    rate: float = 0.0,
) -> int:
    """Send (key, value, headers) with batching, waiting for every acknowledgement; returns the count.
    With a `rate` (messages a second) they are sent at that pace, as a fleet's reporters would."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all", enable_idempotence=True)
    await producer.start()
    sent = 0
    started = time.perf_counter()
    try:
        pending: list[Any] = []
        for key, value, headers in messages:
            pending.append(await producer.send(topic, value, key=key, headers=list(headers.items())))
            sent += 1
            if rate > 0 and sent % PACE_EVERY == 0 and (ahead := sent / rate - (time.perf_counter() - started)) > 0:
                await asyncio.sleep(ahead)
            if len(pending) >= window:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return sent


def enveloped(
    model: BaseModel, *, event_id: str, key: str, source: str = "bench"
) -> tuple[bytes, bytes, dict[str, bytes]]:
    value, headers = envelope.encode(model, event_id=event_id, source=source, at=time.time())
    return key.encode(), value, headers


async def group_stable(bootstrap: str, group: str, members: int, timeout_s: float = 90.0) -> float:
    """Seconds until `group` has been Stable with `members` members for a second."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    start = time.perf_counter()
    stable_since: float | None = None
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                ok = False
                try:
                    for response in await admin.describe_consumer_groups([group]):
                        for described in response.groups:
                            ok = described[2] == "Stable" and len(described[5]) == members
                except Exception:  # the group may not exist yet
                    ok = False
                now = time.perf_counter()
                if ok:
                    stable_since = stable_since or now
                    if now - stable_since >= 1.0:
                        return now - start
                else:
                    stable_since = None
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_average() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


class Services:
    """Service processes (`python -m ...`), each logging to its own file, stopped with SIGTERM after."""

    def __init__(self, log_dir: Path, base_env: dict[str, str]) -> None:
        self.log_dir = log_dir
        self.base_env = base_env
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, module_args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        merged = os.environ | self.base_env | env
        with (self.log_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", *module_args],
                env=merged,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                start_new_session=True,
            )
        self.running[name] = process
        return process

    def check(self) -> None:
        dead = {n: p.returncode for n, p in self.running.items() if p.poll() is not None}
        if dead:
            tails = "\n".join(f"--- {n}\n{self.tail(n)}" for n in dead)
            raise RuntimeError(f"service process(es) exited: {dead}\n{tails}")

    def tail(self, name: str, chars: int = 2000) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-chars:]

    def cpu_s(self) -> dict[str, float]:
        """User + system CPU seconds of each running process so far (from /proc)."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        for name, process in self.running.items():
            try:
                with open(f"/proc/{process.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[name] = (int(fields[11]) + int(fields[12])) / tick
            except OSError:
                out[name] = float("nan")
        return out

    def stop_all(self, grace_s: float = 15.0) -> None:
        stop_processes(self.running.values(), grace_s=grace_s)
