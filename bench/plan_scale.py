"""A fleet-sized plan: `new_state` and the release decision, the planner's memory per cluster with
everything it keeps, and the snapshot's write and load times and size, at 1k to 1M clusters.

Targets (issue 14, target 3): plan (new_state + release) <= 10 s at 1M clusters; RSS growth <= 1 KB
per cluster all included; a snapshot write < 2 s at 1M. Each figure is printed beside its limit.

The fleet is engine_cost's (one stage, 4 automatic partitions, maxUnavailable 10%). The inventory's
models are built first and frozen out of the garbage collector's sight (`gc.freeze`), as a planner
reading its inventory one record at a time never holds them all: the timings are the engine's own,
with collections on. The memory figure is a second fleet built from a stream of models, one at a
time, so the RSS growth is what the planner keeps: records, profiles, partitions, queues, runs.

Run one size per process (`python -m bench.plan_scale --clusters N --json`) so RSS figures are clean.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from bench.engine_cost import FROM_VERSION, NOW, TO_VERSION, fleet, rss_bytes, sequence
from rollout_common.events import ReleaseTarget
from rollout_common.fleet import Cluster
from rollout_planner.engine import EngineState, decide, new_state, snapshot

LIMIT_PLAN_S = 10.0
LIMIT_BYTES_PER_CLUSTER = 1024
LIMIT_WRITE_S = 2.0
LIMIT_AT = 1_000_000  # the size the limits are stated for
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Encoding:
    """One way to write the snapshot's document: encode and decode seconds, bytes."""

    name: str
    write_s: float
    read_s: float
    size_bytes: int


@dataclass
class PlanResult:
    clusters: int
    new_state_s: float
    new_state_cpu_s: float
    release_s: float
    release_cpu_s: float
    plan_s: float
    rss_bytes_per_cluster: float  # the planner's growth, all included, from a streamed inventory
    snapshot_write_s: float
    snapshot_write_cpu_s: float
    snapshot_load_s: float
    snapshot_load_cpu_s: float
    snapshot_bytes: int
    commands: int
    encodings: list[Encoding] = field(default_factory=list)


def stream(count: int) -> Iterator[Cluster]:
    """The inventory as a planner reads it: one validated model at a time."""
    for i in range(count):
        yield Cluster.model_validate({"name": f"c-{i:07d}", "labels": {"env": "prod"}, "version": FROM_VERSION})


def _release(state: EngineState) -> int:
    _, commands = decide(
        state, ReleaseTarget(event_id="bench-release", channel="regular", targets={"1.30": TO_VERSION}), NOW
    )
    return len(commands)


class _Clock:
    """Wall and CPU seconds since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def memory_per_cluster(clusters: int) -> float:
    """RSS growth of building the state from a streamed inventory and deciding the release."""
    gc.collect()
    before = rss_bytes()
    state = new_state(sequence(), stream(clusters))
    _release(state)
    gc.collect()
    grown = rss_bytes() - before
    del state
    return grown / clusters


def encodings(document: dict[str, Any]) -> list[Encoding]:
    """The same snapshot document through each candidate encoder (the chosen one is MessagePack)."""
    json_encoder, json_decoder = msgspec.json.Encoder(), msgspec.json.Decoder()
    candidates: list[tuple[str, Callable[[Any], bytes], Callable[[bytes], Any]]] = [
        ("MessagePack (msgspec), chosen", msgspec.msgpack.encode, msgspec.msgpack.decode),
        ("JSON (msgspec)", json_encoder.encode, json_decoder.decode),
        ("JSON (stdlib)", lambda d: json.dumps(d, separators=(",", ":")).encode(), json.loads),
        (
            "MessagePack + zlib level 1",
            lambda d: zlib.compress(msgspec.msgpack.encode(d), 1),
            lambda b: msgspec.msgpack.decode(zlib.decompress(b)),
        ),
    ]
    out = []
    for name, encode, decode in candidates:
        clock = _Clock()
        data = encode(document)
        write_s, _ = clock.read()
        clock = _Clock()
        decode(data)
        read_s, _ = clock.read()
        out.append(Encoding(name, write_s, read_s, len(data)))
    return out


def measure_plan(clusters: int, *, compare_encodings: bool = True) -> PlanResult:
    # first, while the process has allocated little: memory freed later would be reused and hide growth
    per_cluster = memory_per_cluster(clusters)
    specs = fleet(clusters)
    seq = sequence()
    gc.collect()
    gc.freeze()  # the inventory's models are the input, not the planner's: collections skip them
    try:
        clock = _Clock()
        state = new_state(seq, specs)
        new_state_s, new_state_cpu = clock.read()
        clock = _Clock()
        commands = _release(state)
        release_s, release_cpu = clock.read()
    finally:
        gc.unfreeze()
    specs.clear()
    clock = _Clock()
    data = snapshot.dump(state)
    write_s, write_cpu = clock.read()
    clock = _Clock()
    loaded = snapshot.load(data)
    load_s, load_cpu = clock.read()
    if snapshot.dump(loaded) != data:
        raise AssertionError("a loaded snapshot must write the same bytes")
    compared = encodings(snapshot.document(state)) if compare_encodings else []
    result = PlanResult(
        clusters=clusters,
        new_state_s=new_state_s,
        new_state_cpu_s=new_state_cpu,
        release_s=release_s,
        release_cpu_s=release_cpu,
        plan_s=new_state_s + release_s,
        rss_bytes_per_cluster=per_cluster,
        snapshot_write_s=write_s,
        snapshot_write_cpu_s=write_cpu,
        snapshot_load_s=load_s,
        snapshot_load_cpu_s=load_cpu,
        snapshot_bytes=len(data),
        commands=commands,
        encodings=compared,
    )
    return result


def verdict(value: float, limit: float) -> str:
    return "met" if value <= limit else "missed"


def page_lines(results: list[dict[str, Any]], *, load: str) -> list[str]:
    """The section of docs/benchmarks.md: every figure beside its limit, met or missed at 1M."""
    lines = [
        "## A million-cluster plan and snapshot (target 3)",
        "",
        "`new_state` from the inventory's models and the release decision on a fresh fleet (one stage, "
        "4 automatic partitions), wall and CPU seconds; the planner's RSS growth per cluster with "
        "everything it keeps (records, shared profiles, partitions, queues, runs), from an inventory "
        "streamed one model at a time; the snapshot (format "
        f"{snapshot.FORMAT_VERSION}: MessagePack, clusters as columns) written after the release, "
        f"loaded back, and its size. Limits at {LIMIT_AT:,} clusters: plan ≤ {LIMIT_PLAN_S:.0f} s, "
        f"≤ {LIMIT_BYTES_PER_CLUSTER:,} B per cluster, snapshot write < {LIMIT_WRITE_S:.0f} s. "
        f"Load averages while measured: {load}.",
        "",
        "| clusters | new_state s (CPU) | release s (CPU) | plan s | vs 10 s | RSS B/cluster | vs 1,024 B "
        "| snapshot write s (CPU) | vs 2 s | load s (CPU) | size MB |",
        "|---:|---:|---:|---:|---|---:|---|---:|---|---:|---:|",
    ]
    for res in results:
        n = res["clusters"]
        at_limit = n >= LIMIT_AT
        lines.append(
            f"| {n:,} | {res['new_state_s']:.2f} ({res['new_state_cpu_s']:.2f}) | "
            f"{res['release_s']:.2f} ({res['release_cpu_s']:.2f}) | {res['plan_s']:.2f} | "
            f"{verdict(res['plan_s'], LIMIT_PLAN_S) if at_limit else '-'} | "
            f"{res['rss_bytes_per_cluster']:,.0f} | {verdict(res['rss_bytes_per_cluster'], LIMIT_BYTES_PER_CLUSTER)} | "
            f"{res['snapshot_write_s']:.2f} ({res['snapshot_write_cpu_s']:.2f}) | "
            f"{verdict(res['snapshot_write_s'], LIMIT_WRITE_S) if at_limit else '-'} | "
            f"{res['snapshot_load_s']:.2f} ({res['snapshot_load_cpu_s']:.2f}) | {res['snapshot_bytes'] / 1e6:.1f} |"
        )
    largest = max(results, key=lambda r: r["clusters"]) if results else None
    if largest and largest["encodings"]:
        lines += [
            "",
            f"Encoders for the same snapshot document at {largest['clusters']:,} clusters (encode and "
            "decode only; loading then rebuilds partitions and queues as `new_state` does):",
            "",
            "| encoding | write s | read s | size MB |",
            "|---|---:|---:|---:|",
        ]
        for enc in largest["encodings"]:
            lines.append(
                f"| {enc['name']} | {enc['write_s']:.3f} | {enc['read_s']:.3f} | {enc['size_bytes'] / 1e6:.1f} |"
            )
    return lines


def collect(sizes: list[int], *, isolate: bool, log: Any = sys.stderr) -> dict[str, Any]:
    """Every size, each in a process of its own when `isolate` (clean RSS figures), and the load."""
    results = []
    load_before = _load_average()
    for size in sizes:
        print(f"plan and snapshot: {size} clusters ...", file=log, flush=True)
        if isolate:
            cmd = [sys.executable, "-m", "bench.plan_scale", "--clusters", str(size), "--json"]
            done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
            results.append(json.loads(done.stdout))
        else:
            results.append(asdict(measure_plan(size)))
    return {"results": results, "load": f"{load_before} before, {_load_average()} after"}


def verdicts(data: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Target 3's rows for the page's targets table, judged at the largest fleet measured."""
    top = max(data["results"], key=lambda r: r["clusters"])
    size = f"{top['clusters']:,}"
    return [
        (
            f"plan (new_state + release) <= {LIMIT_PLAN_S:g} s at {size} clusters",
            top["plan_s"] <= LIMIT_PLAN_S,
            f"{top['plan_s']:.2f} s wall ({top['new_state_cpu_s'] + top['release_cpu_s']:.2f} s CPU): "
            f"new_state {top['new_state_s']:.2f} s, release {top['release_s']:.2f} s",
        ),
        (
            f"planner RSS growth, everything included, <= {LIMIT_BYTES_PER_CLUSTER:,} B per cluster",
            top["rss_bytes_per_cluster"] <= LIMIT_BYTES_PER_CLUSTER,
            f"{top['rss_bytes_per_cluster']:,.0f} B/cluster at {size} (records, shared profiles, partitions, "
            "queues, runs; no inventory models kept)",
        ),
        (
            f"snapshot write < {LIMIT_WRITE_S:g} s at {size} clusters",
            top["snapshot_write_s"] < LIMIT_WRITE_S,
            f"{top['snapshot_write_s']:.2f} s write, {top['snapshot_load_s']:.2f} s load, "
            f"{top['snapshot_bytes'] / 1e6:.1f} MB (format 4)",
        ),
    ]


def section(data: dict[str, Any]) -> list[str]:
    return page_lines(data["results"], load=data["load"])


def _load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, required=True)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = asdict(measure_plan(args.clusters))
    if args.json:
        json.dump(result, sys.stdout)
        return
    print("\n".join(page_lines([result], load=_load_average())))


if __name__ == "__main__":
    main()


__all__ = ["PlanResult", "collect", "measure_plan", "page_lines", "section"]
