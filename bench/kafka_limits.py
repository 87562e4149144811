"""Where the time goes in a Kafka benchmark that missed its target: the page's notes on the limits."""

from __future__ import annotations

from typing import Any

from bench.kafka_targets import (
    TARGET_EFFICIENCY,
    TARGET_EFFICIENCY_AT,
    TARGET_LATENCY_P99_MS,
    TARGET_LATENCY_RATIO,
    TARGET_PLANNER_CPU_RATIO,
    TARGET_PLANNER_RATIO,
)


def limits_lines(kafka: dict[str, Any]) -> list[str]:
    """For each missed Kafka target: what limits it, from this run's figures."""
    p = kafka["planner"]
    lat = kafka["latency"]
    runs = {r["executors"]: r for r in kafka["executors"]}
    lines: list[str] = []
    if p["ratio"] < TARGET_PLANNER_RATIO or p.get("cpu_ratio", 0.0) < TARGET_PLANNER_CPU_RATIO:
        alt = kafka.get("planner_alt")
        cpu = max(p["planner_cpu_s"], 1e-9)
        decode = p.get("in_decode_s", 0.0)
        lines += [
            "### Planner over Kafka",
            "",
            f"- The planner reaches {p['ratio']:.1%} of the raw consumer on wall time and "
            f"{p.get('cpu_ratio', float('nan')):.1%} on CPU seconds: a raw read of a record is a few µs, the",
            f"  planner's is {cpu / p['events'] * 1e6:.0f} µs of CPU ({p['planner_cpu_s']:.2f} s for "
            f"{p['events']:,} events). Of its wall time, decoding the records took {decode:.2f} s, `decide` "
            f"{p['in_decide_s']:.2f} s, the per-batch journal write {p['in_persist_s']:.2f} s (the next poll "
            f"is decoded while it runs), {p['in_status_s']:.2f} s building {p.get('status_writes', '?')} status "
            f"documents after the publish, each a walk over the fleet, and {p.get('in_full_snapshot_s', 0):.2f} s "
            f"for {p.get('full_snapshots', '?')} full snapshots.",
            "- The per-batch write no longer grows with the fleet (19f4016 journals events and snapshots every",
            "  200 batches or 30 s); what is left is per record (decode, decide) and per batch (Redis write,",
            "  publish, commit, each a round trip). The raw consumer spent "
            f"{p.get('raw_cpu_s', float('nan')) / p['events'] * 1e6:.1f} µs of CPU per record, so 50% of its",
            f"  rate leaves the planner about {2 * p.get('raw_cpu_s', float('nan')) / p['events'] * 1e6:.0f} µs per "
            "record for decoding, deciding and persisting: out of reach for per-record pydantic validation",
            "  and a Python engine call, whatever the write path does.",
            f"- The raw read of {p['events']:,} records lasts only {p['raw_s']:.2f} s, so its wall rate swings "
            "between runs with the load; the CPU-second ratio is the steadier comparison.",
        ]
        if alt:
            helps = alt["planner_events_per_s"] > 1.1 * p["planner_events_per_s"]
            lines.append(
                f"- With {alt['poll_max_records']:,} records per poll (a setting) the planner did "
                f"{alt['planner_events_per_s']:,.0f} events/s against {p['planner_events_per_s']:,.0f}: "
                + (
                    "spreading per-batch round trips over more events still pays."
                    if helps
                    else "no gain any more, since the per-batch write no longer dominates."
                )
            )
        lines += [
            "",
            "Done for this target: one validator per type, built once, and pydantic's JSON parser straight on",
            "the record's bytes for a binary-mode event that a cheap look shows within the JSON bounds (size,",
            "depth, no number over 40 characters, no NaN/Infinity); anything else goes the bounded path, which",
            "words every refusal (measured per record on this machine: the bounded `json` + `model_validate`",
            "path about 14 µs, `model_validate_json` about 2 µs, orjson + `model_validate` about 2.4 µs, so",
            "no new dependency). The status document's rebuild is held to 5% of the planner's time; event",
            "counters are updated once per kind per batch.",
            "",
            "What is left, and why 50% on CPU is out of reach without changing the engine: `decide` alone",
            f"took {p['in_decide_s']:.2f} s of wall for {p['events']:,} events here, more than the raw consumer's",
            f"whole {p.get('raw_cpu_s', float('nan')):.2f} s of CPU; one engine call per readiness event",
            "(10-20 µs at any fleet size, see the engine section) is already several raw reads.",
            "",
            "Further changes (not made here):",
            "",
            "1. **Build the status document from counters, not a fleet walk**: `stage_view` → `track_status` →",
            "   `_targeted` iterates every member for each track; every stage transition forces one.",
            "2. **Make the full snapshot cheaper, or move it off the loop** (engine memory work, another branch).",
            "3. **Publish the outbox concurrently**: `KafkaBus.publish` awaits `send_and_wait` per message;",
            "   `send` every message, then await them together (same order per partition, idempotent producer).",
        ]
        if alt and alt["planner_events_per_s"] > 1.1 * p["planner_events_per_s"]:
            lines += [
                "5. **Raise `ROLLOUT_POLL_MAX_RECORDS`** when a backlog is expected (second row above): fewer",
                "   per-batch round trips, at the cost of a longer pause per decision.",
            ]
        lines.append("")
    pm, rm = lat["planner_ms"], lat["raw_ms"]
    if not (lat["ratio_p99"] <= TARGET_LATENCY_RATIO and pm["p99"] <= TARGET_LATENCY_P99_MS):
        lines += [
            "### Decision latency",
            "",
            f"- p99 {pm['p99']:.1f} ms against a raw round trip's {rm['p99']:.1f} ms (p50 {pm['p50']:.1f} vs "
            f"{rm['p50']:.1f} ms). A decision is: the planner's poll returns, decode, `decide`, the journal",
            "  entry + checkpoint written to Redis in one round trip (with the status document when a stage",
            "  changed, or at most once a second and 5% of the time), then the outbox published message by",
            "  message with acks=all; the full snapshot (every 200 batches or 30 s) now follows the publish,",
            "  so it no longer lands inside a trial. The path holds a poll wake-up, a Redis round trip and",
            "  Python work before the first byte goes out, where the raw path holds one produce.",
            *(
                [
                    f"- One Redis round trip measured beside each trial: p50 {lat['redis_rtt_ms']['p50']:.1f} / p99 "
                    f"{lat['redis_rtt_ms']['p99']:.1f} ms; the planner makes one per decision, plus one more to "
                    "mark the outbox published (after the batch record is out)."
                ]
                if lat.get("redis_rtt_ms")
                else []
            ),
            *(
                [
                    f"- Split of this run: the planner part (readiness produced → batch record created) p50 "
                    f"{lat['until_publish_ms']['p50']:.1f} / p99 {lat['until_publish_ms']['p99']:.1f} ms; "
                    f"delivery (record created → received) p50 {lat['after_publish_ms']['p50']:.1f} / p99 "
                    f"{lat['after_publish_ms']['p99']:.1f} ms."
                    + (
                        " The planner part dominates."
                        if lat["until_publish_ms"]["p50"] > lat["after_publish_ms"]["p50"]
                        else ""
                    ),
                ]
                if lat.get("until_publish_ms")
                else []
            ),
            "- The tail follows the machine's load (see the load averages): with other work on 2 cores a",
            "  Python process waiting to be scheduled shows up directly in p99 of both paths.",
            "- Neither a poll timeout nor linger is in the path: the planner's poll returns as soon as a",
            "  record arrives (fetch min bytes 1), and its producer sends at once (aiokafka's linger 0).",
            "- The status document build (see the persist floor above) still lands on a trial now and then;",
            "  building it from counters (change 1 above) would take it out of the tail.",
            "",
        ]
    health = {r["workers"]: r for r in kafka.get("health", [])}
    if TARGET_EFFICIENCY_AT in health and health[TARGET_EFFICIENCY_AT]["efficiency"] < TARGET_EFFICIENCY:
        top = health[TARGET_EFFICIENCY_AT]
        wall = max(top["wall_s"], 1e-9)
        one = health.get(1, top)
        one_cores = one["workers_cpu_s"] / max(one["wall_s"], 1e-9)
        lines += [
            "### Health monitor scaling",
            "",
            f"- At {TARGET_EFFICIENCY_AT} workers the workers used {top['workers_cpu_s']:.2f} CPU s in {wall:.2f} s "
            f"({top['workers_cpu_s'] / wall:.2f} cores for {TARGET_EFFICIENCY_AT} processes; "
            f"{top['cpu_per_heartbeat_ms']:.2f} ms CPU per heartbeat).",
            f"  One worker alone got {one_cores:.2f} cores; {TARGET_EFFICIENCY_AT} workers at that pace would need "
            f"{one_cores * TARGET_EFFICIENCY_AT:.2f} of",
            "  the 2 cores, which the broker and other work share (see the load averages: with other runnable",
            "  processes, each gets a fraction of a core). A worker no longer waits for each readiness change's",
            "  acknowledgement (see above): its rate follows the CPU it is given, about 1.4 ms per heartbeat",
            "  (faust's consumer and producer, decoding the envelope, the table row and its changelog record),",
            "  so more workers on the same 2 cores add less than their share. On a machine with a core per",
            "  worker and the broker elsewhere this limit moves; here it is the machine's.",
            "- The heartbeats topic's partition count (4) does not limit it at 4 workers; it caps the worker",
            "  count (see the section above for raising it).",
            *_health_profile_lines(kafka.get("health_profile"), top["cpu_per_heartbeat_ms"]),
            "",
        ]
    if TARGET_EFFICIENCY_AT in runs and runs[TARGET_EFFICIENCY_AT]["efficiency"] < TARGET_EFFICIENCY:
        lines += ["### Executor scaling", "", *executor_limits(runs), ""]
    return lines


def _health_profile_lines(profile: dict[str, Any] | None, worker_ms: float) -> list[str]:
    if not profile:
        return []
    own = profile["cpu_us_per_heartbeat"]
    # pyinstrument names the profiling script by its absolute path: not for the page
    kept = [line for line in profile["pyinstrument"].strip("\n").splitlines() if not line.startswith("Profile at")]
    tree = "\n".join(kept[:45])
    return [
        f"- In process, without a broker (`bench.health_scaling --profile-records {profile['records']}`), the",
        f"  monitor's own work took {own:,.0f} µs of CPU per heartbeat (decode, judge, readiness encoded and",
        "  queued, the table row with faust's changelog record, whose JSON serialisation by faust's codecs is",
        f"  its largest part); a worker spent {worker_ms * 1000:,.0f} µs per heartbeat in all at 4 workers,",
        "  the rest in faust's consumer, its stream machinery and aiokafka. pyinstrument (top):",
        "",
        "```text",
        tree,
        "```",
    ]


def executor_limits(runs: dict[int, dict[str, Any]]) -> list[str]:
    """What bounds the executors on this machine, from the largest run's figures."""
    if not runs:
        return []
    worst = max(runs.values(), key=lambda r: r["executors"])
    cores = worst["executor_cpu_s"] / worst["wall_s"]
    ceiling = 2 / (worst["cpu_per_upgrade_ms"] / 1000) if worst["cpu_per_upgrade_ms"] > 0 else float("inf")
    bound = (
        "so with a 200 ms simulated upgrade they mostly wait on the driver, not on the CPU"
        if cores < 1.0
        else "so the 2 cores (shared with the broker, Redis and the benchmark) are a real limit here"
    )
    return [
        f"What limits it on this 2-core machine: at {worst['executors']} processes the executors used "
        f"{worst['executor_cpu_s']:.1f} CPU s in {worst['wall_s']:.1f} s ({cores:.2f} cores; "
        f"{worst['cpu_per_upgrade_ms']:.1f} ms CPU per upgrade: consume, Redis claim/lease/record, two "
        f"results produced), {bound}. Two cores alone would cap the executors near {ceiling:,.0f} upgrades/s "
        "before the broker and Redis take their share. Below that, what keeps them under the ideal N x 25/s: "
        "an executor takes up to 10 commands per poll and polls again only when all of them are done, so "
        "its 5 slots idle while the last clusters of a poll finish; and commands keyed by id spread over "
        "16 partitions only statistically (2 partitions per process at 8), so the busiest partition's "
        "owner finishes last. The process count itself costs little CPU while they wait on upgrades.",
        "",
    ]


__all__ = ["executor_limits", "limits_lines"]
