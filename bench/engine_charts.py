"""The engine and simulator benchmarks' charts: events per second, latency, and time and memory as the fleet grows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import kafka_report
from bench.charts import save_chart
from bench.engine_tables import (
    TARGET_BYTES_PER_CLUSTER,
    TARGET_EVENTS_PER_S,
)


def charts(data: dict[str, Any], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = [r["engine"] for r in data["engine"]]
    sizes = [e["clusters"] for e in engines]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(
            sizes,
            [e["streams"][regime]["best_events_per_s"] for e in engines],
            marker=marker,
            label=f"engine, {regime}",
        )
    base = [r["baseline"] for r in data["engine"] if "baseline" in r]
    if base:
        ax.plot(
            [b["clusters"] for b in base],
            [b["events_per_s"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: re-partition + full scan per event",
        )
    ax.axhline(TARGET_EVENTS_PER_S, color="grey", linestyle=":", label=f"target {TARGET_EVENTS_PER_S:,}/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("readiness events per second")
    ax.set_title("decide() throughput, one readiness event per call")
    save_chart(fig, ax, folder / "bench-engine.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(sizes, [e["streams"][regime]["best_mean_us"] for e in engines], marker=marker, label=f"{regime} mean")
        ax.plot(
            sizes,
            [e["streams"][regime]["p99_us"] for e in engines],
            marker=marker,
            linestyle="--",
            label=f"{regime} p99",
        )
    ax.set_xscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("µs per event")
    ax.set_ylim(bottom=0)
    ax.set_title("Time per readiness event")
    save_chart(fig, ax, folder / "bench-latency.png")
    images = ["bench-engine.png", "bench-latency.png", *scaling_charts(data, folder)]
    if "kafka" in data:
        images += kafka_report.charts(data["kafka"], folder)
    return images


SCALING_TIME = "bench-scaling-time.svg"
SCALING_MEMORY = "bench-scaling-memory.svg"


def scaling_charts(data: dict[str, Any], folder: Path) -> list[str]:
    """Time per event and memory per cluster against the fleet size, the naive baseline beside them."""
    import matplotlib.pyplot as plt

    engines = [r["engine"] for r in data["engine"]]
    sizes = [e["clusters"] for e in engines]
    base = [r["baseline"] for r in data["engine"] if "baseline" in r]
    windowed = [r["engine"] for r in data.get("engine_windows", [])]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for regime, marker in (("at-gate", "o"), ("spread", "s")):
        ax.plot(
            sizes, [e["streams"][regime]["best_mean_us"] for e in engines], marker=marker, label=f"engine, {regime}"
        )
    if windowed:
        ax.plot(
            [e["clusters"] for e in windowed],
            [e["streams"]["at-gate"]["best_mean_us"] for e in windowed],
            marker="^",
            linestyle="-.",
            label="engine, at-gate, every cluster on a window from 2020",
        )
    if base:
        ax.plot(
            [b["clusters"] for b in base],
            [b["mean_us"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: re-partition + full scan per event",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("µs per readiness event (fastest chunk's mean)")
    ax.set_title("Time per event: engine vs full recompute")
    names = [save_chart(fig, ax, folder / SCALING_TIME)]

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sizes, [e["planner_bytes_per_cluster"] for e in engines], marker="o", label="engine records")
    ax.plot(
        sizes,
        [e["planner_bytes_per_cluster"] + e["inventory_bytes_per_cluster"] for e in engines],
        marker="s",
        label="engine records + inventory models",
    )
    if base and all("bytes_per_cluster" in b for b in base):
        ax.plot(
            [b["clusters"] for b in base],
            [b["bytes_per_cluster"] for b in base],
            marker="x",
            linestyle="--",
            label="naive: inventory models + readiness map",
        )
    ax.axhline(TARGET_BYTES_PER_CLUSTER, color="grey", linestyle=":", label=f"target {TARGET_BYTES_PER_CLUSTER:,} B")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("clusters in the fleet")
    ax.set_ylabel("bytes per cluster (RSS growth)")
    ax.set_title("Memory per cluster")
    names.append(save_chart(fig, ax, folder / SCALING_MEMORY))
    return names


def scaling_lines(data: dict[str, Any], images: list[str]) -> list[str]:
    if SCALING_TIME not in images:
        return []
    base = {r["engine"]["clusters"]: r.get("baseline") for r in data["engine"]}
    rows = [
        "### Scaling shape: time per event and memory per cluster",
        "",
        "The same runs as the tables above, against the fleet size. The naive baseline recomputes the",
        "partitions and scans the fleet per event; its memory is what it keeps between events (the",
        "inventory's `Cluster` models and a readiness map), measured as RSS growth in the same process.",
        "",
        f"![time per event vs clusters]({SCALING_TIME})",
        "",
        f"![memory per cluster vs clusters]({SCALING_MEMORY})",
        "",
        "| clusters | engine µs/event (at-gate) | naive µs/event | engine B/cluster | engine + inventory B/cluster "
        "| naive B/cluster |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for res in data["engine"]:
        e = res["engine"]
        b = base.get(e["clusters"])
        naive_us = f"{b['mean_us']:,.0f}" if b else "-"
        naive_bytes = f"{b['bytes_per_cluster']:,.0f}" if b and "bytes_per_cluster" in b else "-"
        rows.append(
            f"| {e['clusters']:,} | {e['streams']['at-gate']['best_mean_us']:.1f} | {naive_us} | "
            f"{e['planner_bytes_per_cluster']:,.0f} | "
            f"{e['planner_bytes_per_cluster'] + e['inventory_bytes_per_cluster']:,.0f} | {naive_bytes} |"
        )
    return [*rows, ""]


__all__ = ["SCALING_MEMORY", "SCALING_TIME", "charts", "scaling_charts", "scaling_lines"]
