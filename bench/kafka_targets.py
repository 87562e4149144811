"""The Kafka benchmarks' targets, and whether a run met each."""

from __future__ import annotations

from typing import Any

from bench.health_page import cost_verdicts

TARGET_PLANNER_CPU_RATIO = 0.5  # on CPU seconds: what load on a shared machine disturbs least
TARGET_PLANNER_RATIO = 0.25  # on wall time
TARGET_LATENCY_RATIO = 3.0
TARGET_LATENCY_P99_MS = 10.0
TARGET_EFFICIENCY = 0.8
TARGET_EFFICIENCY_AT = 4
TARGET_ROLLOUT_S = 180.0


def verdicts(kafka: dict[str, Any]) -> list[tuple[str, bool, str]]:
    out: list[tuple[str, bool, str]] = []
    p = kafka["planner"]
    cpu_ratio = p.get("cpu_ratio", float("nan"))
    out.append(
        (
            f"planner over Kafka >= {TARGET_PLANNER_CPU_RATIO:.0%} of a raw consumer's rate on CPU seconds "
            f"and >= {TARGET_PLANNER_RATIO:.0%} on wall time (poll size {p['poll_max_records']})",
            cpu_ratio >= TARGET_PLANNER_CPU_RATIO and p["ratio"] >= TARGET_PLANNER_RATIO,
            f"CPU: {cpu_ratio:.1%} ({p['raw_cpu_s']:.2f} s raw vs {p['planner_cpu_s']:.2f} s planner, "
            f"{'met' if cpu_ratio >= TARGET_PLANNER_CPU_RATIO else 'missed'}); wall: "
            f"{p['planner_events_per_s']:,.0f} vs {p['raw_events_per_s']:,.0f} readiness events/s = "
            f"{p['ratio']:.1%} ({'met' if p['ratio'] >= TARGET_PLANNER_RATIO else 'missed'}), "
            f"{p['clusters']:,} clusters",
        )
    )
    lat = kafka["latency"]
    pm, rm = lat["planner_ms"], lat["raw_ms"]
    out.append(
        (
            f"decision latency p99 <= {TARGET_LATENCY_RATIO:g}x raw round trip and <= {TARGET_LATENCY_P99_MS:g} ms",
            lat["ratio_p99"] <= TARGET_LATENCY_RATIO and pm["p99"] <= TARGET_LATENCY_P99_MS,
            f"p99 {pm['p99']:.1f} ms vs raw {rm['p99']:.1f} ms = {lat['ratio_p99']:.1f}x "
            f"(p50 {pm['p50']:.1f} vs {rm['p50']:.1f} ms), {lat['trials']:,} trials",
        )
    )
    runs = {r["executors"]: r for r in kafka["executors"]}
    if TARGET_EFFICIENCY_AT in runs:
        eff = runs[TARGET_EFFICIENCY_AT]["efficiency"]
        out.append(
            (
                f"executor scaling efficiency >= {TARGET_EFFICIENCY:g} at {TARGET_EFFICIENCY_AT} processes",
                eff >= TARGET_EFFICIENCY,
                ", ".join(f"{n}: {r['upgrades_per_s']:.1f}/s ({r['efficiency']:.2f})" for n, r in sorted(runs.items())),
            )
        )
    health = {r["workers"]: r for r in kafka.get("health", [])}
    if TARGET_EFFICIENCY_AT in health:
        eff = health[TARGET_EFFICIENCY_AT]["efficiency"]
        out.append(
            (
                f"health monitor scaling efficiency >= {TARGET_EFFICIENCY:g} at {TARGET_EFFICIENCY_AT} workers",
                eff >= TARGET_EFFICIENCY,
                ", ".join(
                    f"{n}: {r['readiness_per_s']:,.0f}/s ({r['efficiency']:.2f})" for n, r in sorted(health.items())
                )
                + f"; {next(iter(health.values()))['partitions']} heartbeat partitions",
            )
        )
    out += cost_verdicts(kafka.get("health", []), kafka.get("health_steady", []))
    for r in kafka["rollouts"]:
        out.append(
            (
                f"{r['clusters']:,}-cluster rollout through the services within ~{TARGET_ROLLOUT_S:.0f} s",
                r["complete"] and r["wall_s"] <= TARGET_ROLLOUT_S,
                f"{'complete' if r['complete'] else 'NOT complete'} in {r['wall_s']:.1f} s wall, "
                f"{r['cpu_total_s']:.1f} s CPU ({', '.join(f'{k} {v:.1f}' for k, v in r['cpu_s'].items())})",
            )
        )
    return out


__all__ = [
    "TARGET_EFFICIENCY",
    "TARGET_EFFICIENCY_AT",
    "TARGET_LATENCY_P99_MS",
    "TARGET_LATENCY_RATIO",
    "TARGET_PLANNER_CPU_RATIO",
    "TARGET_PLANNER_RATIO",
    "TARGET_ROLLOUT_S",
    "verdicts",
]
