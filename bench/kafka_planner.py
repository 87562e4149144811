"""The planner over the real broker: readiness events per second consumed, decided, persisted, committed.

A fleet of `--clusters` (one stage, 4 partitions, maxUnavailable 10%: the engine benchmark's fleet)
is brought mid-rollout in the engine, and its snapshot is put in Redis as a planner's own, so the
planner restores it as after a restart. `--events` seeded readiness flips (about 64 clusters not
ready at a time: the partition sits at its GATE-1 limit, so flips back to ready hand out batches)
are produced to the readiness topic before the clock starts. Then, in one process:

1. the planner (the service's own `Planner`, `KafkaBus` and `RedisStore`, as `python -m
   rollout_planner.service` wires them) polls, decides, writes snapshot + checkpoint + status in
   one atomic Redis write, publishes, and commits, batch after batch, until its committed offsets
   reach the end of the topic;
2. a raw aiokafka consumer (assigned the topic's partitions, same `max_records`, no decoding) reads
   the same records from the beginning: the limit.

The planner has joined its group and read one warm-up record before the N events are produced, so
its figure does not contain the group join; the raw consumer joins none. Optionally the planner
run is repeated under pyinstrument.

    python -m bench.kafka_planner --clusters 10000 --events 20000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from bench.engine_cost import AT_GATE_POOL, fleet, flip_stream, mid_rollout, sequence
from bench.kafka_common import enveloped, fresh_prefix, infrastructure, load_average, produce_all
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.events import Readiness
from rollout_common.topics import ALL
from rollout_common.topics.catalog import READINESS
from rollout_planner.engine import new_state, snapshot
from rollout_planner.service.checkpoint import CHECKPOINT_KEY, SNAPSHOT_KEY, Checkpoint
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.planner import Planner
from rollout_planner.service.runtime import consumer_options
from rollout_planner.service.settings import PlannerSettings

POLL_MAX_RECORDS = 500


@dataclass
class PlannerKafkaResult:
    clusters: int
    events: int
    poll_max_records: int
    planner_s: float
    planner_cpu_s: float
    planner_events_per_s: float
    planner_batches: int
    committed: int  # records of the readiness topic the planner's group had committed at the end
    in_persist_s: float  # the per-batch Redis write (journal + checkpoint [+ status] [+ full snapshot])
    in_snapshot_dump_s: float  # of which engine_snapshot.dump
    in_status_s: float  # of which encode_status
    in_decide_s: float
    in_decode_s: float  # envelope decoding of the records (Intake.decode)
    in_full_snapshot_s: float  # of in_persist_s: the full snapshots the planner chose to write
    full_snapshots: int
    status_writes: int
    snapshot_bytes: int
    raw_s: float
    raw_events_per_s: float
    ratio: float
    raw_cpu_s: float
    cpu_ratio: float  # the same ratio on CPU seconds: less sensitive to other load on the machine
    commands_out: int
    load: str
    profile_text: str = ""
    profile_top: list[dict[str, Any]] = field(default_factory=list)


class _Timed:
    """Accumulates the wall time of calls to one function (wrapped in place)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def wrap(self, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        return timed


async def _prepare(infra_bootstrap: str, redis_url: str, clusters: int, prefix: str) -> tuple[list[str], int]:
    state = new_state(sequence(), fleet(clusters))
    now = time.time()
    mid_rollout(state, now)
    names = list(state.clusters)
    dumped = snapshot.dump(state)
    store = RedisStore(redis_url, namespace=prefix)
    try:
        await store.put_many({SNAPSHOT_KEY: dumped, CHECKPOINT_KEY: Checkpoint().model_dump_json().encode()})
    finally:
        await store.close()
    bus = KafkaBus(infra_bootstrap, client_id="bench-setup")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])
    finally:
        await bus.close()
    return names, len(dumped)


def _readiness_messages(events: list[Readiness], tag: str) -> list[tuple[bytes, bytes, dict[str, bytes]]]:
    return [enveloped(e, event_id=f"{tag}-{i}", key=READINESS.key(e)) for i, e in enumerate(events)]


async def _committed(bootstrap: str, group: str, topic: str) -> int:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
        return sum(meta.offset for tp, meta in offsets.items() if tp.topic == topic and meta.offset > 0)
    finally:
        await admin.close()


async def _planner_run(
    bootstrap: str, redis_url: str, clusters: int, events: int, *, seed: int, profile: bool, max_records: int
) -> dict[str, Any]:
    prefix = fresh_prefix("planner")
    names, snapshot_bytes = await _prepare(bootstrap, redis_url, clusters, prefix)
    topic = prefix + READINESS.name
    settings = PlannerSettings(
        kafka_bootstrap=bootstrap,
        redis_url=redis_url,
        redis_namespace=prefix,
        topic_prefix=prefix,
        planner_group=prefix + "planner",
        http_port=0,
        create_topics=False,
        poll_max_records=max_records,
        poll_timeout_s=0.5,
    )
    bus = KafkaBus(bootstrap, client_id="bench-planner", consumer_options=consumer_options(settings))
    store = RedisStore(redis_url, namespace=prefix)

    async def no_initial_state() -> None:
        return None

    planner = Planner(
        bus=bus,
        store=store,
        settings=settings,
        clock=ScaledClock(origin=time.time(), scale=1.0),
        initial_state=no_initial_state,  # type: ignore[arg-type]
    )
    # Attribution only: how much of the planner's time is the per-batch write and the decision.
    import rollout_planner.service.durable_state as durable_module
    import rollout_planner.service.status_writer as status_module

    dump_timer, status_timer, persist_timer, decide_timer = _Timed(), _Timed(), _Timed(), _Timed()
    snapshot_timer = _Timed()
    original = (durable_module.engine_snapshot.dump, status_module.encode_status)
    durable_module.engine_snapshot.dump = dump_timer.wrap(original[0])  # type: ignore[attr-defined]
    status_module.encode_status = status_timer.wrap(original[1])  # type: ignore[assignment]
    persist = planner._persist
    write_snapshot = planner._write_snapshot
    decide_fn = planner._decide

    async def timed_persist(*args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        await persist(*args, **kwargs)
        persist_timer.seconds += time.perf_counter() - start

    async def timed_snapshot(*args: Any, **kwargs: Any) -> None:
        start = time.perf_counter()
        await write_snapshot(*args, **kwargs)
        snapshot_timer.seconds += time.perf_counter() - start
        snapshot_timer.calls += 1

    planner._persist = timed_persist  # type: ignore[method-assign]
    planner._write_snapshot = timed_snapshot  # type: ignore[method-assign]
    planner._decide = decide_timer.wrap(decide_fn)  # type: ignore[method-assign]
    decode_timer = _Timed()
    planner._decision.intake.decode_many = decode_timer.wrap(planner._decision.intake.decode_many)  # type: ignore[method-assign]
    # Started only after the planner's run, and assigned rather than subscribed, so that it has
    # fetched nothing ahead while the planner worked and joins no group.
    raw = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    commands_out = 0
    try:
        assert await planner.start()
        # Warm-up: both have joined their group and read one record before the clock starts.
        warm = [Readiness(cluster=names[0], ready=True)]
        await produce_all(bootstrap, topic, _readiness_messages(warm, "warm"))
        while await planner.step() == 0:
            pass
        stream, _ = flip_stream(names, events, AT_GATE_POOL, seed)
        await produce_all(bootstrap, topic, _readiness_messages(stream, "flip"))
        batches_before = planner.checkpoint.batch
        persist_timer.seconds = dump_timer.seconds = status_timer.seconds = decide_timer.seconds = 0.0
        snapshot_timer.seconds, snapshot_timer.calls = 0.0, 0
        decode_timer.seconds = 0.0
        dump_timer.calls = status_timer.calls = 0

        profiler = None
        if profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.001, async_mode="enabled")
            profiler.start()
        gc.collect()  # each timed section starts with no collection owed by what ran before it
        cpu0, wall0 = time.process_time(), time.perf_counter()
        done = 0
        while done < events:
            done += await planner.step()
        await planner.commits_settled()  # its offsets committed too, as the raw consumer's need not be
        planner_s = time.perf_counter() - wall0
        planner_cpu = time.process_time() - cpu0
        profile_text = ""
        if profiler is not None:
            profiler.stop()
            profile_text = profiler.output_text(unicode=True, color=False, show_all=False)
        batches = planner.checkpoint.batch - batches_before
        commands_out = int(planner.metrics.batches_emitted._value.get())
        committed = await _committed(bootstrap, settings.planner_group, topic)

        await raw.start()
        partitions = [TopicPartition(topic, p) for p in range(READINESS.partitions)]
        raw.assign(partitions)
        await raw.seek_to_beginning(*partitions)
        gc.collect()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        got = -1  # the warm-up record comes first
        while got < events:
            chunk = await raw.getmany(timeout_ms=500, max_records=max_records)
            got += sum(len(v) for v in chunk.values())
        raw_s = time.perf_counter() - wall0
        raw_cpu_s = time.process_time() - cpu0
    finally:
        durable_module.engine_snapshot.dump, status_module.encode_status = original  # type: ignore[attr-defined,assignment]
        await raw.stop()
        await planner.close()
        await bus.close()
        await store.close()
    return {
        "planner_s": planner_s,
        "planner_cpu_s": planner_cpu,
        "batches": batches,
        "committed": committed - 1,  # minus the warm-up record
        "persist_s": persist_timer.seconds,
        "full_snapshot_s": snapshot_timer.seconds,
        "full_snapshots": snapshot_timer.calls,
        "status_writes": status_timer.calls,
        "dump_s": dump_timer.seconds,
        "status_s": status_timer.seconds,
        "decide_s": decide_timer.seconds,
        "decode_s": decode_timer.seconds,
        "snapshot_bytes": snapshot_bytes,
        "raw_s": raw_s,
        "raw_cpu_s": raw_cpu_s,
        "commands_out": commands_out,
        "profile_text": profile_text,
    }


def _top_entries(profile_text: str, lines: int = 45) -> str:
    return "\n".join(profile_text.strip("\n").splitlines()[:lines])


async def measure_async(
    bootstrap: str,
    redis_url: str,
    clusters: int,
    events: int,
    *,
    profile: bool = False,
    seed: int = 7,
    max_records: int = POLL_MAX_RECORDS,
) -> PlannerKafkaResult:
    load_before = load_average()
    run = await _planner_run(bootstrap, redis_url, clusters, events, seed=seed, profile=False, max_records=max_records)
    profile_text = ""
    if profile:
        profiled = await _planner_run(
            bootstrap, redis_url, clusters, max(events // 2, 1), seed=seed + 1, profile=True, max_records=max_records
        )
        profile_text = _top_entries(profiled["profile_text"], 60)
    planner_rate = events / run["planner_s"]
    raw_rate = events / run["raw_s"]
    return PlannerKafkaResult(
        clusters=clusters,
        events=events,
        poll_max_records=max_records,
        planner_s=run["planner_s"],
        planner_cpu_s=run["planner_cpu_s"],
        planner_events_per_s=planner_rate,
        planner_batches=run["batches"],
        committed=run["committed"],
        in_persist_s=run["persist_s"],
        in_snapshot_dump_s=run["dump_s"],
        in_status_s=run["status_s"],
        in_decide_s=run["decide_s"],
        in_decode_s=run["decode_s"],
        in_full_snapshot_s=run["full_snapshot_s"],
        full_snapshots=run["full_snapshots"],
        status_writes=run["status_writes"],
        snapshot_bytes=run["snapshot_bytes"],
        raw_s=run["raw_s"],
        raw_events_per_s=raw_rate,
        ratio=planner_rate / raw_rate,
        raw_cpu_s=run["raw_cpu_s"],
        cpu_ratio=(run["raw_cpu_s"] / run["planner_cpu_s"]) if run["planner_cpu_s"] > 0 else float("nan"),
        commands_out=run["commands_out"],
        load=f"{load_before} before, {load_average()} after",
        profile_text=profile_text,
    )


def measure(
    clusters: int,
    events: int,
    *,
    bootstrap: str | None = None,
    redis_url: str | None = None,
    profile: bool = False,
    max_records: int = POLL_MAX_RECORDS,
) -> PlannerKafkaResult:
    with infrastructure(bootstrap, redis_url) as infra:
        return asyncio.run(
            measure_async(infra.bootstrap, infra.redis_url, clusters, events, profile=profile, max_records=max_records)
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--profile", action="store_true", help="repeat the planner run under pyinstrument")
    parser.add_argument("--max-records", type=int, default=POLL_MAX_RECORDS, help="the planner's poll_max_records")
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--redis-url", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(
        args.clusters,
        args.events,
        bootstrap=args.bootstrap,
        redis_url=args.redis_url,
        profile=args.profile,
        max_records=args.max_records,
    )
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        out = asdict(result)
        text = out.pop("profile_text")
        for k, v in out.items():
            print(f"{k}: {v}")
        print(text, file=sys.stderr)


if __name__ == "__main__":
    main()
