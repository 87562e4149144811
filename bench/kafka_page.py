"""The Kafka benchmarks' sections of docs/benchmarks.md: their tables and what they show."""

from __future__ import annotations

from typing import Any

from bench.health_page import health_cost_lines
from bench.kafka_limits import executor_limits


def _ms(d: dict[str, float]) -> str:
    return " | ".join(f"{d[k]:.1f}" for k in ("p50", "p95", "p99", "max", "mean"))


def page_lines(kafka: dict[str, Any], images: list[str]) -> list[str]:
    p = kafka["planner"]
    lat = kafka["latency"]
    lines = [
        "## Planner over Kafka: readiness events per second",
        "",
        "The Kafka benchmarks ran against a single-node broker and a redis-server "
        f"({kafka.get('infrastructure', '?')})",
        "on the same machine: broker, Redis, services and the benchmark share its 2 cores. Each run uses fresh",
        "topics (a new prefix) and a new Redis namespace."
        + (f" These benchmarks ran separately from the engine's: {kafka['run']}." if kafka.get("run") else ""),
        "",
        f"A fleet of {p['clusters']:,} clusters (the engine benchmark's: one stage, 4 partitions, maxUnavailable",
        "10%) is brought mid-rollout in the engine and its snapshot put in Redis as the planner's own.",
        f"{p['events']:,} seeded readiness flips (about 64 clusters not ready at a time) are produced to the",
        "readiness topic first. The planner (the service's `Planner`, `KafkaBus` and `RedisStore`, in the",
        "benchmark's process, after its group join and one warm-up record) then polls, decodes, decides,",
        "journals the batch's events with its checkpoint in one atomic Redis write (since 19f4016 the full",
        "snapshot is written only every 200 batches or 30 s, the status document at most once a second and",
        "at most 5% of the time unless a stage or rollout changed), publishes and commits, batch after batch,",
        "until all are",
        "committed (checked against the group's committed offsets). A raw aiokafka consumer then reads the",
        "same records from the beginning, without decoding: the limit. CPU seconds are the process's own.",
        "",
        "| clusters | events | max records per poll | planner s | planner CPU s | planner events/s | batches | "
        "raw consumer events/s | raw CPU s | planner / raw (wall) | (CPU) | committed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *[
            f"| {q['clusters']:,} | {q['events']:,} | {q['poll_max_records']} | {q['planner_s']:.2f} | "
            f"{q['planner_cpu_s']:.2f} | {q['planner_events_per_s']:,.0f} | {q['planner_batches']:,} | "
            f"{q['raw_events_per_s']:,.0f} | {q.get('raw_cpu_s', float('nan')):.2f} | {q['ratio']:.1%} | "
            f"{q.get('cpu_ratio', float('nan')):.1%} | {q['committed']:,} |"
            for q in (p, kafka.get("planner_alt"))
            if q
        ],
        "",
        f"The first row is the service's default `ROLLOUT_POLL_MAX_RECORDS` ({p['poll_max_records']}) and is the"
        " one judged; a second row, when present, is the same run with larger polls (a setting only).",
        "",
        "Where the planner's time went (wall seconds over the run, measured by wrapping the functions):",
        "",
        "| part | s | share |",
        "|---|---:|---:|",
    ]
    for label, key in (
        ("decoding the records (`Intake.decode`)", "in_decode_s"),
        ("`decide` (the engine)", "in_decide_s"),
        ("per-batch journal write (`_persist`; the next poll is decoded while it runs)", "in_persist_s"),
        (f"status documents, after the publish (`encode_status`, {p.get('status_writes', '?')} built)", "in_status_s"),
        (f"full snapshots, after the publish ({p.get('full_snapshots', '?')} written)", "in_full_snapshot_s"),
    ):
        if key in p:
            lines.append(f"| {label} | {p[key]:.2f} | {p[key] / p['planner_s']:.0%} |")
    # the journal write overlaps the next poll's decoding: the parts may add up to more than the run
    parts = p.get("in_decode_s", 0) + p["in_decide_s"] + p["in_persist_s"] + p.get("in_status_s", 0)
    rest = max(p["planner_s"] - parts - p.get("in_full_snapshot_s", 0), 0.0)
    lines += [
        f"| the rest: polls, publishes, commits, and waiting for a core | {rest:.2f} | {rest / p['planner_s']:.0%} |",
        "",
        f"A full snapshot is {p['snapshot_bytes'] / 1e6:.1f} MB at {p['clusters']:,} clusters. The planner's wall "
        f"time is {p['planner_s'] / max(p['planner_cpu_s'], 1e-9):.1f}x its CPU time: with the load averages of "
        f"the run ({p['load']}) on 2 cores, it waited for a core much of the time.",
        "",
    ]
    if p.get("profile_text"):
        lines += [
            f"pyinstrument, the planner loop over {p['events'] // 2:,} events "
            "(a second, profiled run; top of the tree):",
            "",
            "```text",
            "\n".join(line for line in p["profile_text"].splitlines() if not line.startswith("Profile at ")),
            "```",
            "",
        ]
    lines += [
        "## Decision latency: readiness in, stage-advance out",
        "",
        "The planner runs as its own process (`python -m rollout_planner.service`, fleet from a scenario",
        f"file of {lat['clusters']:,} clusters: one stage, one partition, maxUnavailable 1, maxNew 1). The",
        "benchmark answers each batch as an executor would (untimed), waits until the planner's Redis",
        "checkpoint shows the last result applied, then times from producing the cluster's readiness event",
        "to an independent consumer (all 16 stage-advance partitions assigned) receiving the one batch it",
        "opens. Each trial is paired with a raw round trip (same producer: acks=all, idempotent, no linger;",
        "a one-partition topic and its consumer) in the same run.",
        "",
    ]
    if any(i.startswith("bench-latency-kafka") for i in images):
        lines += ["![decision latency CDF](bench-latency-kafka.png)", ""]
    lines += [
        "| path | trials | p50 ms | p95 ms | p99 ms | max ms | mean ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| readiness → stage-advance (planner) | {lat['trials']:,} | {_ms(lat['planner_ms'])} |",
        f"| raw produce → consume | {lat['trials']:,} | {_ms(lat['raw_ms'])} |",
        f"| ratio | | {lat['ratio_p50']:.1f}x | | {lat['ratio_p99']:.1f}x | | |",
        *(
            [
                f"| … planner part: readiness produced → batch record created | | {_ms(lat['until_publish_ms'])} |",
                f"| … delivery part: batch record created → received | | {_ms(lat['after_publish_ms'])} |",
            ]
            if lat.get("until_publish_ms")
            else []
        ),
        *(
            [f"| one Redis round trip (PING; the planner makes one per decision) | | {_ms(lat['redis_rtt_ms'])} |"]
            if lat.get("redis_rtt_ms")
            else []
        ),
        "",
        *(
            [
                "The split uses the batch record's CreateTime (set by the planner's producer, ms resolution,",
                "same machine clock). For scale, at this fleet one full snapshot takes "
                f"{lat['persist_floor_ms']['snapshot_dump']:.1f} ms and one status document "
                f"{lat['persist_floor_ms']['encode_status']:.1f} ms to build",
                "(median, in the benchmark's process); the planner writes them only now and then (see above).",
                "",
            ]
            if lat.get("persist_floor_ms")
            else []
        ),
        f"Load: {lat['load']}.",
        "",
        "## Executor scaling",
        "",
        "N `python -m rollout_executor` processes (simulated driver, 200 ms per upgrade, 5 upgrades at once",
        "per process, 10 commands per poll) in one group on a 16-partition stage-advance topic; commands of",
        "5 clusters each (250 upgrades per process), produced once the group is stable; throughput until an",
        "independent consumer has seen every `succeeded` result. Efficiency = throughput(N) / (N x",
        "throughput(1)).",
        "",
    ]
    if any(i.startswith("bench-executors") for i in images):
        lines += ["![executor scaling](bench-executors.png)", ""]
    lines += [
        "| processes | upgrades | wall s | upgrades/s | ideal/s | efficiency | executors' CPU s | "
        "CPU ms/upgrade | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(kafka["executors"], key=lambda r: r["executors"]):
        lines.append(
            f"| {r['executors']} | {r['upgrades']:,} | {r['wall_s']:.2f} | {r['upgrades_per_s']:.1f} | "
            f"{r['ideal_per_s']:.0f} | {r['efficiency']:.2f} | {r['executor_cpu_s']:.2f} | "
            f"{r['cpu_per_upgrade_ms']:.1f} | {r['load']} |"
        )
    lines += ["", *executor_limits({r["executors"]: r for r in kafka["executors"]})]
    lines += health_lines(kafka.get("health", []))
    lines += health_cost_lines(kafka.get("health", []), kafka.get("health_steady", []))
    lines += [
        "",
        "## Whole rollout through the real services",
        "",
        "Planner and 2 executor processes over the broker and Redis; the fleet from a scenario file; stages",
        "of 5/25/70%, default rolloutStrategy (maxUnavailable 100%, maxNew 50, autoPartitionSize 25%), soak",
        "1h per stage at time scale 3600 (1 s), 50 ms per simulated upgrade and track, 50 upgrades at once",
        "per executor. No health services: with maxUnavailable 100% readiness gates nothing (GATE-4). Wall",
        "time from producing the release target to the last stage/track COMPLETE on the progress topic; CPU",
        "seconds of each process over the same span (from /proc).",
        "",
        "| clusters | stages | executors | wall s | CPU s total | CPU s per process | upgrades | batches | "
        "complete | load |",
        "|---:|---:|---:|---:|---:|---|---:|---:|---|---|",
    ]
    for r in kafka["rollouts"]:
        cpu = ", ".join(f"{k} {v:.1f}" for k, v in r["cpu_s"].items())
        lines.append(
            f"| {r['clusters']:,} | {r['stages']} | {r['executors']} | {r['wall_s']:.1f} | {r['cpu_total_s']:.1f} | "
            f"{cpu} | {r['upgrades']:,} | {r['batches']:,} | {'yes' if r['complete'] else 'NO'} | {r['load']} |"
        )
    lines.append("")
    return lines


HEALTH_TITLE = "## Health monitor scaling: heartbeats into readiness"


def health_lines(runs: list[dict[str, Any]]) -> list[str]:
    if not runs:
        return []
    partitions = runs[0]["partitions"]
    lines = [
        "",
        HEALTH_TITLE,
        "",
        "N `python -m rollout_health monitor` workers (faust, agent concurrency 1) in one group on the",
        f"heartbeats topic, which has **{partitions} partitions** (`HEARTBEATS` in",
        "`libs/common/rollout_common/topics/catalog.py`): a partition is read by one worker, so more than",
        f"{partitions} workers would idle. Once the group is stable, N x the per-worker count of first",
        "heartbeats (one per cluster, each becoming one `Readiness`) are produced; the rate counts until an",
        "independent consumer of the readiness topic has seen them all. Efficiency = rate(N) / (N x",
        "rate(1)). CPU seconds are the workers' (supervisor and worker processes, from /proc).",
        "",
        "A worker sends each readiness change without awaiting the broker's acknowledgement before the next",
        "heartbeat; it writes the heartbeat's row and acks its event (so faust may commit the offset) only",
        "once that change and every earlier one are acknowledged (`rollout_health/in_flight.py`, at most",
        "1,000 in flight), so nothing is committed ahead of what was published. Until 2026-12-01 it awaited",
        "each acknowledgement: 1 worker 70/s, 2 workers 129/s (0.92), 4 workers 203/s (0.72), load 17-33.",
        "",
        "| workers | heartbeats | wall s | readiness/s | efficiency | workers' CPU s | CPU ms/heartbeat | "
        "group join s | load |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in sorted(runs, key=lambda x: x["workers"]):
        lines.append(
            f"| {r['workers']} | {r['heartbeats']:,} | {r['wall_s']:.2f} | {r['readiness_per_s']:,.0f} | "
            f"{r['efficiency']:.2f} | {r['workers_cpu_s']:.2f} | {r['cpu_per_heartbeat_ms']:.2f} | "
            f"{r['group_stable_s']:.1f} | {r['load']} |"
        )
    lines += [
        "",
        f"Raising the partition count: for a new deployment, change `partitions={partitions}` of `HEARTBEATS`",
        "(the monitor's table and its changelog take the same count, and rows are placed by the same key",
        "hash as the heartbeats). Topics that exist are kept as they are, so on a running system: stop every",
        "monitor worker, add partitions to the heartbeats topic (`kafka-topics.sh --alter --partitions N`),",
        "delete the table's changelog topic (`<prefix>rollout-health-cluster-health-changelog`), and start",
        "workers built with the new count. The rows are learnt again from the next heartbeats; a cluster",
        "silent since before the change has no row, so it is marked stale only once it reports again.",
    ]
    return lines


__all__ = ["HEALTH_TITLE", "health_lines", "page_lines"]
