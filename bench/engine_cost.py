"""Cost of one readiness event through `decide`, at fleets of 1k to 1M clusters, and a naive baseline.

The fleet is one stage split into 4 automatic partitions (autoPartitionSize 25%), maxUnavailable 10%.
Setup publishes a release, lets the engine hand out batches, feeds upgrade results and readiness so that
many clusters are mid-rollout, then times a seeded stream of Readiness flips, one `decide` call each.

The baseline does what Fleet does on every event: recompute the partitions from the inventory
(`plan_partitions`) and count the not-ready clusters of each partition with a full scan.

Run one size per process (`python -m bench.engine_cost --clusters N --json`) so RSS figures are clean.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import random
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from rollout_common.commands import Command, StageAdvance
from rollout_common.events import Event, EventBatch, Readiness, ReleaseTarget, UpgradeResult
from rollout_common.fleet import Cluster
from rollout_common.quantity import resolve
from rollout_common.sequence import Sequence
from rollout_common.status import Track
from rollout_planner.engine import EngineState, decide, new_state
from rollout_planner.engine.partitioning import plan_partitions

FROM_VERSION = "1.30.5-gke.1000"
TO_VERSION = "1.31.13-gke.1023000"
NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z; the engine never reads a clock of its own
FEED_CHUNK = 2_000
# The windows variant: every cluster holds an hourly 30-minute window defined years before NOW. It is
# open at every instant the benchmark decides at (NOW .. NOW+720 s), so both runs do the same work
# and the difference is what asking the window costs (WIN-1).
OLD_WINDOW = {"start": "2020-01-01T00:00:00Z", "duration": "30m", "recurrence": "FREQ=HOURLY"}


def sequence() -> Sequence:
    return Sequence.model_validate(
        {
            "name": "bench",
            "channel": "regular",
            "stages": [
                {
                    "name": "prod",
                    "clusterSelector": {"matchLabels": {"env": "prod"}},
                    "soak": "1d",
                    "rolloutStrategy": {
                        "autoPartitionSize": "25%",
                        "autoPartitionThreshold": 100,
                        "maxUnavailable": "10%",
                    },
                }
            ],
        }
    )


def fleet(count: int, *, windows: bool = False) -> list[Cluster]:
    extra: dict[str, Any] = {"maintenanceWindow": OLD_WINDOW} if windows else {}
    return [
        Cluster.model_validate({"name": f"c-{i:07d}", "labels": {"env": "prod"}, "version": FROM_VERSION, **extra})
        for i in range(count)
    ]


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@dataclass
class StreamResult:
    """One timed stream of readiness flips over the same mid-rollout state."""

    regime: str
    pool: int
    events: int
    events_per_s: float  # whole stream, wall clock
    best_events_per_s: float  # the fastest of CHUNKS equal chunks: the least disturbed by other load
    cpu_events_per_s: float  # whole stream, process CPU time
    mean_us: float
    best_mean_us: float
    p50_us: float
    p99_us: float
    max_us: float
    commands: int


@dataclass
class EngineResult:
    clusters: int
    new_state_s: float
    release_s: float
    plan_s: float
    setup_feed_s: float
    inventory_bytes_per_cluster: float
    planner_bytes_per_cluster: float
    running: int
    awaiting_ready: int
    partition0_unavailable: int
    partition0_max_unavailable: int
    record_breakdown: dict[str, int] = field(default_factory=dict)
    streams: dict[str, StreamResult] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)


@dataclass
class BaselineResult:
    clusters: int
    events: int
    events_per_s: float
    mean_us: float
    total_s: float


def _advances(commands: list[Command]) -> list[StageAdvance]:
    return [c for c in commands if isinstance(c, StageAdvance)]


def _feed(state: EngineState, events: list[Event], now: float) -> list[StageAdvance]:
    out: list[StageAdvance] = []
    for start in range(0, len(events), FEED_CHUNK):
        _, commands = decide(state, EventBatch(events=tuple(events[start : start + FEED_CHUNK])), now)
        out += _advances(commands)
    return out


def _results(batches: list[StageAdvance], share: float) -> tuple[list[Event], list[str]]:
    """Succeeded results for the first `share` of the clusters handed out, in hand-out order."""
    names = [(b, n) for b in batches for n in b.clusters]
    chosen = names[: int(len(names) * share)]
    events: list[Event] = [
        UpgradeResult(command_id=b.command_id, cluster=n, track=b.track, version=b.version, outcome="succeeded")
        for b, n in chosen
    ]
    return events, [n for _, n in chosen]


def mid_rollout(state: EngineState, now: float) -> tuple[float, float]:
    """Release, then: half of the handed-out clusters succeed, half of those report ready (GATE-1 reopens)."""
    start = time.perf_counter()
    _, commands = decide(
        state, ReleaseTarget(event_id="bench-release", channel="regular", targets={"1.30": TO_VERSION}), now
    )
    release_s = time.perf_counter() - start
    batches = _advances(commands)
    start = time.perf_counter()
    results, succeeded = _results([b for b in batches if b.track is Track.CONTROL_PLANE], 0.5)
    batches += _feed(state, results, now + 600)
    ready: list[Event] = [Readiness(cluster=n, ready=True) for n in succeeded[: len(succeeded) // 2]]
    _feed(state, ready, now + 660)
    return release_s, time.perf_counter() - start


def flip_stream(names: list[str], count: int, pool: int, seed: int) -> tuple[list[Readiness], list[Readiness]]:
    """Seeded Readiness flips on random clusters: a random walk around `pool` clusters flipped not ready.

    Returns the stream and the events that restore every cluster it left not ready.
    """
    rng = random.Random(seed)
    flipped: list[str] = []
    flipped_set: set[str] = set()
    out: list[Readiness] = []
    while len(out) < count:
        # restore one with probability len/(2*pool): the flipped set hovers around `pool`
        if flipped and rng.random() < len(flipped) / (2 * pool):
            index = rng.randrange(len(flipped))
            name = flipped[index]
            flipped[index] = flipped[-1]
            flipped.pop()
            flipped_set.discard(name)
            out.append(Readiness(cluster=name, ready=True))
        else:
            name = names[rng.randrange(len(names))]
            if name in flipped_set:
                continue
            flipped.append(name)
            flipped_set.add(name)
            out.append(Readiness(cluster=name, ready=False))
    return out, [Readiness(cluster=n, ready=True) for n in flipped]


def _percentile(sorted_ns: list[int], q: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(q * len(sorted_ns)))] / 1000.0


# "at-gate": a few dozen clusters flipped at any time, so partition 0 stays within maxNew of its limit and
# every event makes the dispatcher try (and refuse) a batch: the engine's most expensive steady state.
# "spread": 1% of the fleet flipped, so partition 0 sits far above its limit and the gate check is O(1).
AT_GATE_POOL = 64


def regimes(clusters: int) -> dict[str, int]:
    return {"at-gate": AT_GATE_POOL, "spread": max(1, clusters // 100)}


def record_breakdown(state: EngineState) -> dict[str, int]:
    """Shallow sizes of one pending cluster's record and the containers it owns (sys.getsizeof)."""
    record = next(c for c in reversed(state.clusters.values()) if not c.busy)
    # per-track pairs, profiles and done_by sets are shared objects (model.pair): nothing per cluster
    sizes = {"ClusterRec object": sys.getsizeof(record), "name string": sys.getsizeof(record.name)}
    table = sys.getsizeof(state.clusters) / max(1, len(state.clusters))
    sizes["state.clusters dict slot"] = round(table)
    return sizes


CHUNKS = 5


def time_stream(state: EngineState, events: list[Readiness], now: float) -> tuple[list[int], list[int], float, int]:
    """Per-event wall times (ns), wall time of each of CHUNKS equal chunks (ns), CPU seconds, commands."""
    durations: list[int] = []
    chunks: list[int] = []
    produced = 0
    size = max(1, len(events) // CHUNKS)
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()  # as a long-running planner would tune it; collections are not the engine's cost
    try:
        cpu0 = time.process_time()
        for start in range(0, len(events), size):
            begin = clock()
            for event in events[start : start + size]:
                t0 = clock()
                _, commands = decide(state, event, now)
                durations.append(clock() - t0)
                produced += len(commands)
            chunks.append(clock() - begin)
        cpu = time.process_time() - cpu0
    finally:
        gc.enable()
    return durations, chunks, cpu, produced


def measure_engine(
    clusters: int, events: int, *, seed: int = 1, profile_events: int = 0, windows: bool = False
) -> EngineResult:
    gc.collect()
    rss0 = rss_bytes()
    specs = fleet(clusters, windows=windows)
    gc.collect()
    rss1 = rss_bytes()
    seq = sequence()
    start = time.perf_counter()
    state = new_state(seq, specs)
    new_state_s = time.perf_counter() - start
    release_s, feed_s = mid_rollout(state, NOW)
    del specs
    gc.collect()
    rss2 = rss_bytes()
    partition = state.stages[0].partitions[0]
    result = EngineResult(
        clusters=clusters,
        new_state_s=new_state_s,
        release_s=release_s,
        plan_s=new_state_s + release_s,
        setup_feed_s=feed_s,
        inventory_bytes_per_cluster=(rss1 - rss0) / clusters,
        planner_bytes_per_cluster=(rss2 - rss1) / clusters,
        running=sum(1 for c in state.clusters.values() if c.busy),
        awaiting_ready=sum(1 for c in state.clusters.values() if c.awaiting_ready),
        partition0_unavailable=partition.unavailable,
        partition0_max_unavailable=partition.max_unavailable,
    )
    result.record_breakdown = record_breakdown(state)
    names = list(state.clusters)
    now = NOW + 720
    for number, (regime, pool) in enumerate(regimes(clusters).items()):
        stream, restore = flip_stream(names, events, pool, seed + number)
        durations, chunks, cpu, produced = time_stream(state, stream, now)
        size = max(1, len(stream) // CHUNKS)
        best = min(chunks[: len(stream) // size] or chunks)
        durations.sort()
        result.streams[regime] = StreamResult(
            regime=regime,
            pool=pool,
            events=len(stream),
            events_per_s=len(stream) / (sum(chunks) / 1e9),
            best_events_per_s=size / (best / 1e9),
            cpu_events_per_s=len(stream) / cpu if cpu > 0 else 0.0,
            mean_us=sum(durations) / len(durations) / 1000.0,
            best_mean_us=best / size / 1000.0,
            p50_us=_percentile(durations, 0.5),
            p99_us=_percentile(durations, 0.99),
            max_us=durations[-1] / 1000.0,
            commands=produced,
        )
        if profile_events:
            extra, more = flip_stream(names, profile_events, pool, seed + 100 + number)
            decide(state, EventBatch(events=tuple(restore)), now)
            result.profile[regime] = profile_stream(state, extra, now)
            restore = more
        decide(state, EventBatch(events=tuple(restore)), now)
    return result


def profile_stream(state: EngineState, events: list[Readiness], now: float) -> dict[str, Any]:
    """cProfile (exact shares per function) and pyinstrument (call tree) over the same kind of stream."""
    half = len(events) // 2
    profiler = cProfile.Profile()
    profiler.enable()
    for event in events[:half]:
        decide(state, event, now)
    profiler.disable()
    stats = pstats.Stats(profiler)
    entries = stats.stats  # type: ignore[attr-defined]
    # shares of the time spent inside decide(), so the benchmark loop does not dilute them
    total = next((v[3] for k, v in entries.items() if k[2] == "decide" and k[0].endswith("decide.py")), stats.total_tt)  # type: ignore[attr-defined]
    rows = []
    for (path, line, func), (_cc, calls, tottime, cumtime, _) in entries.items():
        if func == "<module>" or path.endswith("engine_cost.py") or "cProfile" in func:
            continue
        rows.append(
            {
                "function": f"{_short(path)}:{line}({func})",
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
                "self_share": tottime / total if total else 0.0,
                "cum_share": cumtime / total if total else 0.0,
            }
        )
    rows.sort(key=lambda r: r["tottime_s"], reverse=True)
    tree = ""
    try:
        from pyinstrument import Profiler
    except ImportError:  # pragma: no cover - pyinstrument is a dev extra
        tree = "(pyinstrument not installed)"
    else:
        sampler = Profiler(interval=0.0001)
        sampler.start()
        for event in events[half:]:
            decide(state, event, now)
        sampler.stop()
        tree = sampler.output_text(unicode=False, color=False, show_all=False)
    return {"events": len(events), "total_s": total, "top_self": rows[:25], "pyinstrument": tree}


def _short(path: str) -> str:
    for marker in ("rollout_planner/", "rollout_common/", "pydantic/", "lib/python3"):
        if marker in path:
            return marker + path.split(marker, 1)[1]
    return path


def measure_baseline(clusters: int, events: int, *, budget_s: float, seed: int = 1) -> BaselineResult:
    """Fleet's approach: per event, recompute partitions and count not-ready clusters per partition."""
    specs = fleet(clusters)
    seq = sequence()
    stage = seq.stages[0]
    ready = {c.name: True for c in specs}
    rng = random.Random(seed)
    names = list(ready)
    strategy = stage.rollout_strategy
    done = 0
    gate_open = 0
    begin = time.perf_counter()
    deadline = begin + budget_s
    while done < events and (done < 3 or time.perf_counter() < deadline):
        name = names[rng.randrange(len(names))]
        ready[name] = not ready[name]
        plan = plan_partitions(stage, specs)
        not_ready_partitions = 0
        limit = resolve(strategy.max_unavailable_partitions, len(plan.partitions))
        for partition in plan.partitions:
            unavailable = sum(1 for n in partition.clusters if not ready[n])
            if unavailable > partition.max_unavailable:
                not_ready_partitions += 1
            if not_ready_partitions > limit:
                break
            gate_open += 1
        done += 1
    total = time.perf_counter() - begin
    return BaselineResult(
        clusters=clusters,
        events=done,
        events_per_s=done / total,
        mean_us=total / done * 1e6,
        total_s=total,
    )


def measure_naive_memory(clusters: int) -> float:
    """RSS growth per cluster of what the naive planner keeps between events: the inventory's Cluster
    models and a readiness map. Run first in a fresh process: memory another run freed would be
    reused and not show as growth."""
    gc.collect()
    rss0 = rss_bytes()
    specs = fleet(clusters)
    ready = {c.name: True for c in specs}
    gc.collect()
    kept = (rss_bytes() - rss0) / clusters
    del ready, specs
    return kept


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--profile-events", type=int, default=0, help="profile this many more events")
    parser.add_argument("--baseline-events", type=int, default=0, help="0: no baseline")
    parser.add_argument("--baseline-budget", type=float, default=20.0, help="seconds")
    parser.add_argument("--windows", action="store_true", help="every cluster with an hourly window from 2020")
    parser.add_argument("--naive-memory", action="store_true", help="only the naive baseline's memory per cluster")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.naive_memory:
        print(json.dumps({"clusters": args.clusters, "bytes_per_cluster": measure_naive_memory(args.clusters)}))
        return
    out: dict[str, Any] = {
        "engine": asdict(
            measure_engine(args.clusters, args.events, profile_events=args.profile_events, windows=args.windows)
        )
    }
    if args.baseline_events:
        gc.collect()
        out["baseline"] = asdict(measure_baseline(args.clusters, args.baseline_events, budget_s=args.baseline_budget))
    if args.json:
        json.dump(out, sys.stdout)
    else:
        engine = out["engine"]
        print(
            f"{args.clusters} clusters: plan {engine['plan_s']:.2f} s, "
            f"{engine['planner_bytes_per_cluster']:.0f} B/cluster"
        )
        for stream in engine["streams"].values():
            print(
                f"  {stream['regime']}: {stream['best_events_per_s']:.0f} events/s (best chunk), "
                f"mean {stream['mean_us']:.1f} us, "
                f"p99 {stream['p99_us']:.1f} us"
            )
        if "baseline" in out:
            print(f"baseline: {out['baseline']['events_per_s']:.1f} events/s over {out['baseline']['events']}")


if __name__ == "__main__":
    main()


__all__ = ["BaselineResult", "EngineResult", "measure_baseline", "measure_engine", "measure_naive_memory"]
