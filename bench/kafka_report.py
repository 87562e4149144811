"""The Kafka benchmarks in `bench.run`: running them, their targets, tables, charts and page sections.

Also the engine's before/after-optimisation table, from the figures kept in
`bench/figures-before-optimisation.json` (the page as generated before the optimisations).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.charts import save_chart

ROOT = Path(__file__).resolve().parent.parent
BEFORE = Path(__file__).resolve().parent / "figures-before-optimisation.json"

TARGET_PLANNER_CPU_RATIO = 0.5  # on CPU seconds: what load on a shared machine disturbs least
TARGET_PLANNER_RATIO = 0.25  # on wall time
TARGET_LATENCY_RATIO = 3.0
TARGET_LATENCY_P99_MS = 10.0
TARGET_EFFICIENCY = 0.8
TARGET_EFFICIENCY_AT = 4
TARGET_ROLLOUT_S = 180.0


@dataclass
class KafkaPlan:
    planner_clusters: int
    planner_events: int
    planner_profile: bool
    planner_alt_max_records: int | None  # a second run with larger polls (a setting, not a code change)
    latency_trials: int
    executors: list[int]
    per_executor: int
    rollout_clusters: list[int]
    rollout_timeout_s: float
    health_workers: list[int] = field(default_factory=list)
    health_per_worker: int = 0


KAFKA_FULL = KafkaPlan(
    planner_clusters=10_000,
    planner_events=20_000,
    planner_profile=True,
    planner_alt_max_records=5_000,
    latency_trials=1_000,
    executors=[1, 2, 4, 8],
    per_executor=250,
    rollout_clusters=[10_000],
    rollout_timeout_s=240.0,
    health_workers=[1, 2, 4],
    health_per_worker=2_000,
)
KAFKA_QUICK = KafkaPlan(
    planner_clusters=200,
    planner_events=200,
    planner_profile=False,
    planner_alt_max_records=None,
    latency_trials=5,
    executors=[1, 2],
    per_executor=10,
    rollout_clusters=[60],
    rollout_timeout_s=60.0,
    health_workers=[1, 2],
    health_per_worker=20,
)


def _subprocess_json(module: str, args: list[str]) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", module, *args, "--json"], cwd=ROOT, check=True, capture_output=True, text=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def collect(plan: KafkaPlan, bootstrap: str, redis_url: str, *, isolate: bool, log: Any = sys.stderr) -> dict[str, Any]:
    """Each benchmark in its own process (isolate) or in this one, against the given broker and Redis."""
    infra = ["--bootstrap", bootstrap, "--redis-url", redis_url]
    out: dict[str, Any] = {}
    print(
        f"planner over Kafka: {plan.planner_clusters} clusters, {plan.planner_events} events ...", file=log, flush=True
    )

    def planner(*, max_records: int | None, profile: bool) -> Any:
        """One planner-over-Kafka measurement, isolated or in this process; `max_records` None:
        the planner's default."""
        if isolate:
            args = ["--clusters", str(plan.planner_clusters), "--events", str(plan.planner_events), *infra]
            args += ["--max-records", str(max_records)] if max_records else []
            return _subprocess_json("bench.kafka_planner", args + (["--profile"] if profile else []))
        from bench import kafka_planner

        result = kafka_planner.measure(
            plan.planner_clusters,
            plan.planner_events,
            bootstrap=bootstrap,
            redis_url=redis_url,
            profile=profile,
            max_records=max_records or kafka_planner.POLL_MAX_RECORDS,
        )
        return asdict(result)

    out["planner"] = planner(max_records=None, profile=plan.planner_profile)
    if plan.planner_alt_max_records:
        print(f"planner over Kafka, max records {plan.planner_alt_max_records} ...", file=log, flush=True)
        out["planner_alt"] = planner(max_records=plan.planner_alt_max_records, profile=False)
    print(f"decision latency: {plan.latency_trials} trials ...", file=log, flush=True)
    if isolate:
        out["latency"] = _subprocess_json("bench.decision_latency", ["--trials", str(plan.latency_trials), *infra])
    else:
        from bench import decision_latency

        out["latency"] = asdict(decision_latency.measure(plan.latency_trials, bootstrap=bootstrap, redis_url=redis_url))
    print(f"executor scaling: {plan.executors} processes ...", file=log, flush=True)
    if isolate:
        args = ["--executors", *map(str, plan.executors), "--per-executor", str(plan.per_executor), *infra]
        out["executors"] = _subprocess_json("bench.executor_scaling", args)
    else:
        from bench import executor_scaling

        runs = executor_scaling.measure(plan.executors, plan.per_executor, bootstrap=bootstrap, redis_url=redis_url)
        out["executors"] = [asdict(r) for r in runs]
    if plan.health_workers:
        print(f"health monitor scaling: {plan.health_workers} workers ...", file=log, flush=True)
        if isolate:
            args = ["--workers", *map(str, plan.health_workers), "--per-worker", str(plan.health_per_worker), *infra]
            out["health"] = _subprocess_json("bench.health_scaling", args)
        else:
            from bench import health_scaling

            runs = health_scaling.measure(plan.health_workers, plan.health_per_worker, bootstrap=bootstrap)
            out["health"] = [asdict(r) for r in runs]
        print("health monitor, in-process profile ...", file=log, flush=True)
        records = str(max(100, plan.health_per_worker))
        out["health_profile"] = _subprocess_json("bench.health_scaling", ["--profile-records", records])
    out["rollouts"] = []
    for clusters in plan.rollout_clusters:
        print(f"whole rollout through the services: {clusters} clusters ...", file=log, flush=True)
        if isolate:
            args = ["--clusters", str(clusters), "--timeout", str(plan.rollout_timeout_s), *infra]
            out["rollouts"].append(_subprocess_json("bench.services_rollout", args))
        else:
            from bench import services_rollout

            result = services_rollout.measure(
                clusters, bootstrap=bootstrap, redis_url=redis_url, timeout_s=plan.rollout_timeout_s
            )
            out["rollouts"].append(asdict(result))
    return out


# ---------------------------------------------------------------- targets


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


# ---------------------------------------------------------------- before / after


def before_after_lines(engine_results: list[dict[str, Any]]) -> list[str]:
    if not BEFORE.exists():
        return []
    before = json.loads(BEFORE.read_text())
    old = {(r["clusters"], r["regime"]): r for r in before["engine"]}
    old_mem = {r["clusters"]: r for r in before["setup"]}
    lines = [
        "## Engine before/after optimisation",
        "",
        f"Before: {before['source']}; machine then: {before['machine']}. After: this run. What changed:",
        "",
        "- **O(1) GATE-1 refusal** (8ea870a): each partition keeps a count of queued clusters that are",
        "  themselves unavailable, so a batch that would breach maxUnavailable is refused from counters",
        "  instead of popping maxNew clusters off the heap, checking each and pushing them back.",
        "- **Shared immutable per-track pairs** (d0b96d1): the rarely written per-track fields of a",
        "  cluster record point at one shared immutable pair until first written, instead of ten fresh",
        "  2-lists and two empty sets per cluster.",
        "- **Compact cluster records**: a record keeps its name and version pair; labels, channel, groups,",
        "  window, exclusions and API usage sit in a profile shared by every cluster with the same values",
        "  (selectors evaluated once per profile), and a release retargets the first cluster of each kind",
        "  and copies the effects to the alike ones. The inventory's models are not kept.",
        "",
        "Both runs are on a shared 2-core machine, and this one under more load (see the load averages",
        "at the top against the ones above): compare the best-chunk and CPU-time columns. p99, and the",
        "plan times at 1M clusters (one long run each, no best-of), move with the load more than with",
        "the code.",
        "",
        "| clusters | regime | events/s before | events/s after | x | CPU-time events/s before | after | "
        "mean µs before | after | p99 µs before | after |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for res in engine_results:
        engine = res["engine"]
        for regime, st in engine["streams"].items():
            b = old.get((engine["clusters"], regime))
            if b is None:
                continue
            lines.append(
                f"| {engine['clusters']:,} | {regime} | {b['best_events_per_s']:,.0f} | "
                f"{st['best_events_per_s']:,.0f} | {st['best_events_per_s'] / b['best_events_per_s']:.2f} | "
                f"{b['cpu_events_per_s']:,.0f} | {st['cpu_events_per_s']:,.0f} | {b['best_mean_us']:.1f} | "
                f"{st['best_mean_us']:.1f} | {b['p99_us']:.1f} | {st['p99_us']:.1f} |"
            )
    lines += [
        "",
        "| clusters | planner B/cluster before | after | plan total s before | after |",
        "|---:|---:|---:|---:|---:|",
    ]
    for res in engine_results:
        engine = res["engine"]
        b = old_mem.get(engine["clusters"])
        if b is None:
            continue
        lines.append(
            f"| {engine['clusters']:,} | {b['planner_bytes_per_cluster']:,} | "
            f"{engine['planner_bytes_per_cluster']:,.0f} | {b['plan_s']:.3f} | {engine['plan_s']:.3f} |"
        )
    lines.append("")
    return lines


# ---------------------------------------------------------------- charts


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


# ---------------------------------------------------------------- page sections


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
        ("per-batch Redis write (`_persist`), all of it", "in_persist_s"),
        (f"… of which status documents (`encode_status`, {p.get('status_writes', '?')} built)", "in_status_s"),
        (f"full snapshots, after the publish ({p.get('full_snapshots', '?')} written)", "in_full_snapshot_s"),
    ):
        if key in p:
            lines.append(f"| {label} | {p[key]:.2f} | {p[key] / p['planner_s']:.0%} |")
    rest = (
        p["planner_s"] - p.get("in_decode_s", 0) - p["in_decide_s"] - p["in_persist_s"] - p.get("in_full_snapshot_s", 0)
    )
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
            f"{p['in_decide_s']:.2f} s, the per-batch Redis write {p['in_persist_s']:.2f} s (of which "
            f"{p['in_status_s']:.2f} s building {p.get('status_writes', '?')} status documents, each a walk over "
            f"the fleet, and {p.get('in_full_snapshot_s', 0):.2f} s for {p.get('full_snapshots', '?')} full "
            "snapshots).",
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
