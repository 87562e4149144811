"""Health monitor scaling: first heartbeats turned into readiness events per second, by 1..N workers.

N `python -m rollout_health monitor` processes (faust, agent concurrency 1) join one group on the
heartbeats topic (`rollout.cluster-heartbeats`, its partition count from the topic catalog: the
most workers that can share the work). Once the group is stable, `--per-worker` x N heartbeats of
as many clusters (each a cluster's first, so each becomes one Readiness) are produced; the rate is
counted until an independent consumer of the readiness topic has seen all of them. Efficiency =
rate(N) / (N x rate(1)).

    python -m bench.health_scaling --workers 1 2 4 --per-worker 2000 --json
    python -m bench.health_scaling --kind steady --workers 1 2 4 --per-worker 2000 --rounds 8 --json
    python -m bench.health_scaling --profile-records 2000 --json   # the monitor's own work, in process

`--kind steady` measures a fleet at rest instead: the first heartbeats are sent and turned into
readiness before the clock starts, then `--rounds` more of each cluster, observed 30 s apart (a
reporter's default interval), saying what the first said. Nothing is published; the run ends when
the group has committed every heartbeat. At the default `checkpoint_interval_s` (120 s) one in four
of them writes its cluster's row. CPU per heartbeat is the figure: wall time includes faust's commit
interval (about 3 s), and on this shared 2-core machine CPU is what the limits are judged on.
With `--rate` the rounds are produced at that many heartbeats a second per worker, as a fleet's
reporters send them, instead of all at once (a backlog the workers read in large fetches).

The in-process profile runs the monitor's `on_record` (decode, judge, readiness encoded and queued,
table row and its changelog record) over first heartbeats with an outbox that acknowledges at once,
no broker: what a worker spends per heartbeat outside faust's consumer and aiokafka.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.kafka_common import (
    Services,
    enveloped,
    fresh_prefix,
    group_stable,
    infrastructure,
    load_average,
    produce_all,
)
from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.heartbeat import Heartbeat
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS

APP_ID = "rollout-health"


ROUND_S = 30.0  # a reporter's default heartbeat interval
IDLE_S = 3.0  # how long a steady run watches the workers idle before its heartbeats


@dataclass
class HealthRun:
    kind: str
    workers: int
    partitions: int
    heartbeats: int
    wall_s: float
    readiness_per_s: float
    efficiency: float
    workers_cpu_s: float
    cpu_per_heartbeat_ms: float
    group_stable_s: float
    load: str
    # steady runs: the workers' CPU a second while they had nothing to do (faust's timers, the group's
    # heartbeats, the staleness check), and the CPU per heartbeat without that fixed cost over the
    # run's wall time (which includes waiting for faust's commit interval)
    idle_cpu_per_s: float = 0.0
    net_cpu_per_heartbeat_ms: float = float("nan")


def _tree_cpu_s(services: Services) -> float:
    """User + system CPU seconds of every service process and its children (the monitor is a
    supervisor whose worker is a child process)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [p.pid for p in services.running.values()]
    while pending:
        pid = pending.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                pending += [int(c) for c in f.read().split()]
        except OSError:
            continue  # exited meanwhile
    return total


def _heartbeats(clusters: int, *, observed_at: float, round_: int = 0) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    return [
        enveloped(
            Heartbeat(cluster=f"c-{i:07d}", ready=True, observed_at=observed_at, reporter="bench"),
            event_id=f"hb-{round_}-{i}",
            key=f"c-{i:07d}",
        )
        for i in range(clusters)
    ]


async def _all_committed(bootstrap: str, group: str, topic: str, *, partitions: int, timeout_s: float) -> None:
    """Until `group` has committed the end of every partition of `topic` (faust commits on a timer)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    ends = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await admin.start()
    await ends.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(partitions)]
        end = await ends.end_offsets(parts)
        assert sum(end.values()) > 0, end
        async with asyncio.timeout(timeout_s):
            while True:
                offsets = await admin.list_consumer_group_offsets(group)
                if all(tp in offsets and offsets[tp].offset >= end[tp] for tp in parts):
                    return
                await asyncio.sleep(0.1)
    finally:
        await ends.stop()
        await admin.close()


async def one_run(
    bootstrap: str,
    workers: int,
    clusters: int,
    log_dir: Path,
    *,
    kind: str = "first",
    rounds: int = 0,
    partitions: int,
    rate: float = 0.0,
) -> HealthRun:
    load_before = load_average()
    prefix = fresh_prefix(f"health{workers}")
    bus = KafkaBus(bootstrap, client_id="bench-setup")
    try:
        await bus.ensure_topics(
            [HEARTBEATS.spec(prefix, partitions=partitions)] + [t.spec(prefix) for t in (READINESS, DEAD_LETTER)]
        )
    finally:
        await bus.close()
    services = Services(
        log_dir,
        {"ROLLOUT_KAFKA_BOOTSTRAP": bootstrap, "ROLLOUT_TOPIC_PARTITIONS": json.dumps({HEARTBEATS.name: partitions})},
    )
    readiness = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        for number in range(workers):
            services.start(
                f"monitor-{workers}-{number}",
                ["rollout_health", "monitor"],
                {
                    "ROLLOUT_TOPIC_PREFIX": prefix,
                    "ROLLOUT_REPUBLISH_INTERVAL_S": "0",  # only the changes are counted
                    "ROLLOUT_STALENESS_LIMIT_S": "3600",
                    "ROLLOUT_ROW_EXPIRY_S": "7200",  # must exceed the staleness limit
                    "ROLLOUT_METRICS_PORT": "0",
                    "ROLLOUT_LOG_LEVEL": "WARNING",
                    # not the repository, the services' working directory
                    "ROLLOUT_DATA_DIR": str(log_dir / f"monitor-{workers}-{number}-data"),
                },
            )
        stable_s = await group_stable(bootstrap, prefix + APP_ID, workers, timeout_s=180.0)
        services.check()
        await readiness.start()
        parts = [TopicPartition(prefix + READINESS.name, p) for p in range(READINESS.partitions)]
        readiness.assign(parts)
        await readiness.seek_to_beginning(*parts)
        # Steady rounds are observed 30 s apart up to now: the first round is the oldest.
        first_at = time.time() - ROUND_S * rounds if kind == "steady" else time.time()
        messages = _heartbeats(clusters, observed_at=first_at)
        idle_per_s = 0.0
        cpu_before = _tree_cpu_s(services)
        start = time.perf_counter()
        await produce_all(bootstrap, prefix + HEARTBEATS.name, messages)
        seen = 0
        last = start
        async with asyncio.timeout(max(180.0, clusters / 50)):
            while seen < clusters:
                batches = await readiness.getmany(timeout_ms=1000)
                got = sum(len(records) for records in batches.values())
                if got:
                    seen += got
                    last = time.perf_counter()
                services.check()
        heartbeats = clusters
        if kind == "steady":
            await _all_committed(
                bootstrap, prefix + APP_ID, prefix + HEARTBEATS.name, partitions=partitions, timeout_s=120.0
            )
            steady = [
                message
                for round_ in range(1, rounds + 1)
                for message in _heartbeats(clusters, observed_at=first_at + ROUND_S * round_, round_=round_)
            ]
            heartbeats = len(steady)
            idle_per_s = await _idle_cpu_per_s(services)
            cpu_before = _tree_cpu_s(services)
            start = time.perf_counter()
            await produce_all(bootstrap, prefix + HEARTBEATS.name, steady, rate=rate)
            await _all_committed(
                bootstrap,
                prefix + APP_ID,
                prefix + HEARTBEATS.name,
                partitions=partitions,
                timeout_s=max(180.0, heartbeats / 100),
            )
            last = time.perf_counter()
            services.check()
        wall = last - start
        cpu = _tree_cpu_s(services) - cpu_before
        net_ms = (cpu - idle_per_s * wall) / heartbeats * 1000 if kind == "steady" else float("nan")
    finally:
        services.stop_all()
        await readiness.stop()
    return HealthRun(
        kind=kind,
        workers=workers,
        partitions=partitions,
        heartbeats=heartbeats,
        wall_s=wall,
        readiness_per_s=heartbeats / wall,
        efficiency=float("nan"),
        workers_cpu_s=cpu,
        cpu_per_heartbeat_ms=cpu / heartbeats * 1000,
        group_stable_s=stable_s,
        load=f"{load_before} before, {load_average()} after",
        idle_cpu_per_s=idle_per_s,
        net_cpu_per_heartbeat_ms=net_ms,
    )


async def _idle_cpu_per_s(services: Services, seconds: float = IDLE_S) -> float:
    """The workers' CPU a second over `seconds` with nothing to do (every heartbeat committed)."""
    cpu, start = _tree_cpu_s(services), time.perf_counter()
    await asyncio.sleep(seconds)
    return (_tree_cpu_s(services) - cpu) / (time.perf_counter() - start)


async def measure_async(
    bootstrap: str,
    workers: list[int],
    per_worker: int,
    log_dir: Path,
    *,
    kind: str = "first",
    rounds: int = 0,
    partitions: int = HEARTBEATS.partitions,
    rate: float = 0.0,
) -> list[HealthRun]:
    runs = [
        await one_run(
            bootstrap, n, per_worker * n, log_dir, kind=kind, rounds=rounds, partitions=partitions, rate=rate * n
        )
        for n in workers
    ]
    base = next((r.readiness_per_s for r in runs if r.workers == 1), None)
    for r in runs:
        if base:
            r.efficiency = r.readiness_per_s / (r.workers * base)
    return runs


class _AckedOutbox:
    """Acknowledges every send at once: the profile measures the monitor, not a broker."""

    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None:
        return None

    async def send_soon(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]
    ) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


async def _profile_async(records: int, *, kind: str = "first", rounds: int = 4) -> dict[str, Any]:
    import faust
    from pyinstrument import Profiler

    from rollout_common.envelope import encode
    from rollout_common.ports import Record
    from rollout_health.monitor import HealthMonitor
    from rollout_health.settings import MonitorSettings

    now = time.time()
    monitor = HealthMonitor(MonitorSettings(republish_interval_s=0), outbox=_AckedOutbox(), clock=lambda: now)
    monitor.app.finalize()
    monitor.app.flow_control.resume()

    def beats(clusters: int, observed_at: float) -> list[Record]:
        made = []
        for i in range(clusters):
            name = f"c-{i:07d}"
            value, headers = encode(
                Heartbeat(cluster=name, ready=True, observed_at=observed_at, reporter="bench"),
                event_id=f"hb-{i}",
                source="bench",
                at=observed_at,
            )
            made.append(
                Record(
                    topic="heartbeats",
                    partition=0,
                    offset=i,
                    key=name.encode(),
                    value=value,
                    headers=headers,
                    timestamp_ms=0,
                )
            )
        return made

    if kind == "steady":  # first heartbeats unmeasured, then rounds 30 s apart that change nothing
        first_at = now - ROUND_S * rounds
        warm = beats(records, first_at)
        batch = [r for round_ in range(1, rounds + 1) for r in beats(records, first_at + ROUND_S * round_)]
    else:
        warm, batch = [], beats(records, now)
    raw = monitor.app.channel(schema=faust.Schema(key_serializer="raw", value_serializer="raw"))
    try:
        async with monitor.agent.test_context(channel=raw):  # the table needs the agent's context
            for record in warm:
                await monitor.on_record(record)
            sampler = Profiler(interval=0.0002)
            sampler.start()
            cpu0 = time.process_time()
            for record in batch:
                await monitor.on_record(record)
            cpu = time.process_time() - cpu0
            sampler.stop()
    finally:
        consumer = monitor.app._consumer  # its never-started thread made an event loop of its own
        if consumer is not None:
            consumer._thread.thread_loop.close()
    tree = sampler.output_text(unicode=False, color=False, show_all=False)
    count = len(batch)
    return {"kind": kind, "records": count, "cpu_us_per_heartbeat": cpu / count * 1e6, "pyinstrument": tree}


def profile_on_record(records: int, *, kind: str = "first", rounds: int = 4) -> dict[str, Any]:
    return asyncio.run(_profile_async(records, kind=kind, rounds=rounds))


def measure(
    workers: list[int],
    per_worker: int,
    *,
    bootstrap: str | None = None,
    kind: str = "first",
    rounds: int = 0,
    partitions: int = HEARTBEATS.partitions,
    rate: float = 0.0,
) -> list[HealthRun]:
    with infrastructure(bootstrap, None) as infra, tempfile.TemporaryDirectory(prefix="bench-health-") as tmp:
        return asyncio.run(
            measure_async(
                infra.bootstrap,
                workers,
                per_worker,
                Path(tmp),
                kind=kind,
                rounds=rounds,
                partitions=partitions,
                rate=rate,
            )
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--per-worker", type=int, default=2_000, help="first heartbeats per worker process")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None, help="unused (the monitor needs no Redis); accepted for bench.run")
    parser.add_argument("--kind", choices=["first", "steady"], default="first", help="first heartbeats, or at rest")
    parser.add_argument("--rounds", type=int, default=8, help="steady: heartbeats per cluster after its first")
    parser.add_argument("--partitions", type=int, default=HEARTBEATS.partitions, help="of the heartbeats topic")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="steady: heartbeats a second per worker, paced (0: all at once)"
    )
    parser.add_argument("--profile-records", type=int, default=0, help="profile the monitor in process instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.profile_records:
        print(json.dumps(profile_on_record(args.profile_records, kind=args.kind, rounds=args.rounds)))
        return
    runs = measure(
        args.workers,
        args.per_worker,
        bootstrap=args.bootstrap,
        kind=args.kind,
        rounds=args.rounds if args.kind == "steady" else 0,
        partitions=args.partitions,
        rate=args.rate,
    )
    out: list[dict[str, Any]] = [asdict(r) for r in runs]
    print(json.dumps(out) if args.json else json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
