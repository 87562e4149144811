"""The Kafka benchmarks' charts: executor scaling and decision latency."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.charts import save_chart
from bench.kafka_targets import (
    TARGET_LATENCY_P99_MS,
)


def charts(kafka: dict[str, Any], folder: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    runs = sorted(kafka["executors"], key=lambda r: r["executors"])
    if runs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = [r["executors"] for r in runs]
        ax.plot(xs, [r["upgrades_per_s"] for r in runs], marker="o", label="measured")
        ax.plot(xs, [r["ideal_per_s"] for r in runs], linestyle=":", color="grey", label="ideal (N x 5 / 0.2 s)")
        base = next((r["upgrades_per_s"] for r in runs if r["executors"] == 1), None)
        if base:
            ax.plot(xs, [base * n for n in xs], linestyle="--", label="linear from 1 process")
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set_xlabel("executor processes")
        ax.set_ylabel("upgrades per second")
        ax.set_title("Executor scaling (simulated driver, 200 ms per upgrade)")
        names.append(save_chart(fig, ax, folder / "bench-executors.png"))
    lat = kafka["latency"]
    if lat.get("samples_ms"):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for label, key in (
            ("readiness → stage-advance (planner)", "samples_ms"),
            ("raw produce → consume", "raw_samples_ms"),
        ):
            values = sorted(lat[key])
            ax.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=label)
        ax.axvline(TARGET_LATENCY_P99_MS, color="grey", linestyle=":", label=f"{TARGET_LATENCY_P99_MS:g} ms")
        ax.set_xscale("log")
        ax.set_xlabel("ms")
        ax.set_ylabel("share of trials")
        ax.set_title("Decision latency over Kafka (CDF)")
        names.append(save_chart(fig, ax, folder / "bench-latency-kafka.png"))
    return names


__all__ = ["charts"]
