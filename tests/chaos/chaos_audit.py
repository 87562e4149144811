"""An independent audit of one rollout from what is on the topics, not from what the services say.

Input: every record of the progress, stage-advance, upgrade-results and readiness topics (read by
the test with its own plain consumer) and the fleet the test defined. Output: a list of findings,
each one sentence naming the cluster, batch or partition concerned; an empty list is a pass.

Timing arguments use Kafka record timestamps (CreateTime, stamped by each producer when it sends,
all on this one machine). The planner can only have known of a record that existed before it
decided, and it publishes a batch after deciding, so anything with a timestamp after a batch's
first publication cannot have influenced that batch. Every gate check below counts only what the
planner *certainly* saw as unfinished or unavailable, so a finding is a real violation, never an
artefact of reconstruction; the price is that a violation hidden by the reconstruction's blind
spots (records the planner had not yet polled) goes unseen.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TRACKS = ("controlPlane", "nodes")


@dataclass(frozen=True, slots=True)
class Rec:
    """One Kafka record, decoded: the JSON body and the headers as text."""

    topic: str
    partition: int
    offset: int
    ts_ms: int
    headers: Mapping[str, str]
    body: Mapping[str, Any]

    @property
    def ce_id(self) -> str:
        return self.headers.get("ce_id", "")

    @property
    def ce_time(self) -> float:
        raw = self.headers.get("ce_time")
        return dt.datetime.fromisoformat(raw).timestamp() if raw else self.ts_ms / 1000


def decode(
    topic: str,
    partition: int,
    offset: int,
    ts_ms: int,
    headers: Iterable[tuple[str, bytes | None]],
    value: bytes | None,
) -> Rec:
    text = {name: (data or b"").decode(errors="replace") for name, data in headers}
    return Rec(topic, partition, offset, ts_ms, text, json.loads(value) if value else {})


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    name: str
    members: tuple[str, ...]
    max_unavailable: int


@dataclass(frozen=True, slots=True)
class StagePlan:
    name: str
    max_new: int
    max_unavailable_partitions: int
    partitions: tuple[PartitionPlan, ...]


@dataclass
class Audit:
    findings: list[str] = field(default_factory=list)
    succeeded_keys: int = 0
    duplicates: int = 0  # (cluster, track, version) whose driver was started more than once
    explained_duplicates: int = 0  # of those, the ones an executor kill mid-upgrade explains
    missing: int = 0
    batches: int = 0
    batches_gate_checked: int = 0
    oversize_batches: int = 0
    gate1_violations: int = 0
    gate3_violations: int = 0
    decided_twice: int = 0
    completed_tracks: int = 0

    def find(self, text: str) -> None:
        self.findings.append(text)


# -- partitions the fleet must have, by PART-3/PART-4, computed here and not asked of the planner --


def resolve(value: int | str, n: int) -> int:
    """A count or percentage against n (the spec's rule)."""
    if n == 0:
        return 0
    if isinstance(value, str):
        pct = float(value.rstrip("%"))
        return 0 if pct == 0 else min(n, max(1, int(n * pct // 100)))
    return max(0, min(int(value), n))


def auto_partitions(names: Sequence[str], strategy: Mapping[str, Any]) -> list[PartitionPlan]:
    ordered = sorted(names)
    threshold = strategy.get("autoPartitionThreshold", 200)
    if threshold == 0 or len(ordered) < threshold:
        groups = [ordered]
    else:
        size = max(1, resolve(strategy.get("autoPartitionSize", "25%"), len(ordered)))
        groups = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    plans, start = [], 0
    for group in groups:
        name = "All" if len(groups) == 1 else f"Partition {start} - {start + len(group)}"
        plans.append(PartitionPlan(name, tuple(group), resolve(strategy.get("maxUnavailable", "100%"), len(group))))
        start += len(group)
    return plans


# -- the audit -----------------------------------------------------------------------------------


def first_publications(progress: Sequence[Rec], stage_advance: Sequence[Rec]) -> list[tuple[int, dict[str, Any]]]:
    """(earliest timestamp, body) per batch, in the planner's decision order (the progress topic
    is one partition). A batch re-published after a planner restart keeps its id and counts once."""
    earliest: dict[str, int] = {}
    for rec in stage_advance:
        cid = rec.body["commandId"]
        earliest[cid] = min(earliest.get(cid, rec.ts_ms), rec.ts_ms)
    seen: set[str] = set()
    ordered = []
    for rec in progress:
        if rec.body.get("kind") != "stage_advance":
            continue
        cid = rec.body["commandId"]
        if cid in seen:
            continue
        seen.add(cid)
        ordered.append((min(earliest.get(cid, rec.ts_ms), rec.ts_ms), dict(rec.body)))
    return ordered


def audit(
    *,
    plans: Mapping[str, StagePlan],
    version: str,
    progress: Sequence[Rec],
    stage_advance: Sequence[Rec],
    results: Sequence[Rec],
    readiness: Sequence[Rec],
    executor_kills: Mapping[str, Sequence[float]],
    lease_s: float,
) -> Audit:
    report = Audit()
    batches = first_publications(progress, stage_advance)
    report.batches = len(batches)
    every = {(c, t) for plan in plans.values() for p in plan.partitions for c in p.members for t in TRACKS}

    _check_completion(report, plans, version, progress)
    _check_batches_on_both_topics(report, progress, stage_advance)
    _check_decided_once(report, every, batches)
    _check_upgrades(report, every, version, results, executor_kills, lease_s)
    _check_gates(report, plans, batches, results, readiness)
    return report


def _check_completion(report: Audit, plans: Mapping[str, StagePlan], version: str, progress: Sequence[Rec]) -> None:
    complete: dict[tuple[str, str], str] = {}
    for rec in progress:
        body = rec.body
        if body.get("kind") == "stage_transition" and body.get("state") == "COMPLETE":
            complete[(body["stage"], body["track"])] = body["version"]
    report.completed_tracks = len(complete)
    for stage in plans:
        for track in TRACKS:
            got = complete.get((stage, track))
            if got != version:
                report.find(f"stage {stage} track {track} never became COMPLETE on {version} (got {got})")


def _check_batches_on_both_topics(report: Audit, progress: Sequence[Rec], stage_advance: Sequence[Rec]) -> None:
    on_progress = {r.body["commandId"]: r.body["clusters"] for r in progress if r.body.get("kind") == "stage_advance"}
    on_topic = {r.body["commandId"]: r.body["clusters"] for r in stage_advance}
    if set(on_progress) != set(on_topic):
        only_p = sorted(set(on_progress) - set(on_topic))[:5]
        only_t = sorted(set(on_topic) - set(on_progress))[:5]
        report.find(
            f"batches differ between progress and stage-advance: only on progress {only_p}, only on "
            f"stage-advance {only_t}"
        )
    # the same id must always carry the same clusters (a re-published batch is byte for byte the same)
    clusters_by_id: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for rec in [*progress, *stage_advance]:
        if rec.body.get("kind", "stage_advance") == "stage_advance" and "commandId" in rec.body:
            clusters_by_id[rec.body["commandId"]].add(tuple(rec.body["clusters"]))
    for cid, variants in clusters_by_id.items():
        if len(variants) > 1:
            report.find(f"batch {cid} was published with different clusters: {sorted(variants)}")


def _check_decided_once(
    report: Audit, every: set[tuple[str, str]], batches: Sequence[tuple[int, dict[str, Any]]]
) -> None:
    commands: dict[tuple[str, str], set[str]] = defaultdict(set)
    for _, body in batches:
        for cluster in body["clusters"]:
            commands[(cluster, body["track"])].add(body["commandId"])
    twice = {key: sorted(ids) for key, ids in commands.items() if len(ids) > 1}
    report.decided_twice = len(twice)
    for key, ids in sorted(twice.items())[:10]:
        report.find(f"{key[0]} {key[1]} handed out in {len(ids)} batches: {ids}")
    never = sorted(every - set(commands))
    for key in never[:10]:
        report.find(f"{key[0]} {key[1]} never handed out")


def _check_upgrades(
    report: Audit,
    every: set[tuple[str, str]],
    version: str,
    results: Sequence[Rec],
    executor_kills: Mapping[str, Sequence[float]],
    lease_s: float,
) -> None:
    """Exactly one upgrade per cluster, track and version, none missing.

    A driver run is announced by one `started` result. The executor encodes a result once and
    retries only the publish, so a record repeated by a producer retry has the same ce_id *and*
    ce_time, while a second run of the driver is encoded afresh: distinct (ce_id, ce_time) pairs
    of `started` count the driver runs. A second run is allowed only where the executor that
    started the first one was SIGKILLed between the two (it died mid-upgrade, before recording
    its result; its lease then expired and the next executor started again).
    """
    starts: dict[tuple[str, str, str], dict[tuple[str, float], str]] = defaultdict(dict)
    succeeded: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for rec in results:
        body = rec.body
        key = (body["cluster"], body["track"], body["version"])
        if body["version"] != version:
            report.find(f"result for {key} names a version other than {version}")
        if body["outcome"] == "started":
            starts[key].setdefault((rec.ce_id, rec.ce_time), rec.headers.get("ce_source", ""))
        elif body["outcome"] == "succeeded":
            succeeded[key].add(body["commandId"])
        else:
            report.find(f"{key} failed: {body.get('error')}")
    report.succeeded_keys = len(succeeded)
    have = {(c, t) for (c, t, v) in succeeded if v == version}
    missing = sorted(every - have)
    report.missing = len(missing)
    for key in missing[:10]:
        report.find(f"{key[0]} {key[1]} never upgraded to {version}")
    for key, runs in sorted(starts.items()):
        if len(runs) <= 1:
            continue
        report.duplicates += 1
        ordered = sorted((at, source) for (_, at), source in runs.items())
        unexplained = []
        for (first_at, first_source), (next_at, _) in itertools.pairwise(ordered):
            name = first_source.rsplit("/", 1)[-1]
            kills = executor_kills.get(name, ())
            if not any(first_at <= k <= next_at for k in kills):
                unexplained.append(f"{first_source} at {first_at:.3f}, again at {next_at:.3f}")
        if unexplained:
            report.find(f"{key} upgraded {len(runs)} times with no executor killed in between: {unexplained}")
        else:
            report.explained_duplicates += 1


def _check_gates(
    report: Audit,
    plans: Mapping[str, StagePlan],
    batches: Sequence[tuple[int, dict[str, Any]]],
    results: Sequence[Rec],
    readiness: Sequence[Rec],
) -> None:
    succeeded_at: dict[tuple[str, str], int] = {}
    for rec in results:
        if rec.body["outcome"] == "succeeded":
            key = (rec.body["cluster"], rec.body["track"])
            succeeded_at[key] = min(succeeded_at.get(key, rec.ts_ms), rec.ts_ms)
    ready_at: dict[str, list[int]] = defaultdict(list)
    for rec in readiness:
        if rec.body.get("ready") is True:
            ready_at[rec.body["cluster"]].append(rec.ts_ms)
    handouts: dict[str, list[tuple[int, str]]] = defaultdict(list)  # cluster -> [(time, track)]
    first_of_partition: set[tuple[str, str, str, str]] = set()
    partition_of = {
        (stage, c): (index, p)
        for stage, plan in plans.items()
        for index, p in enumerate(plan.partitions)
        for c in p.members
    }

    def certainly_unavailable(cluster: str, t: int) -> bool:
        before = [(h, track) for h, track in handouts[cluster] if h < t]
        if not before:
            return False
        h, track = max(before)
        done = succeeded_at.get((cluster, track))
        if done is None or done >= t:
            return True
        return not any(h < r < t for r in ready_at[cluster])

    def certainly_not_done(cluster: str, track: str, t: int) -> bool:
        done = succeeded_at.get((cluster, track))
        return done is None or done >= t

    for t, body in batches:
        stage, track, clusters = body["stage"], body["track"], body["clusters"]
        plan = plans[stage]
        if len(clusters) > plan.max_new:
            report.oversize_batches += 1
            report.find(f"batch {body['commandId']} has {len(clusters)} clusters, maxNew is {plan.max_new}")
        indices = {partition_of[(stage, c)][0] for c in clusters}
        if len(indices) != 1:
            report.find(f"batch {body['commandId']} spans partitions {sorted(indices)}")
            continue
        index = indices.pop()
        partition = plan.partitions[index]
        if body.get("partition") != partition.name:
            report.find(
                f"batch {body['commandId']} says partition {body.get('partition')!r}, its clusters are in "
                f"{partition.name!r}"
            )
        report.batches_gate_checked += 1
        # GATE-3: partitions before this one that the planner certainly saw NotReady
        not_ready = [
            p.name
            for p in plan.partitions[:index]
            if sum(certainly_not_done(c, track, t) for c in p.members) > p.max_unavailable
        ]
        if len(not_ready) > plan.max_unavailable_partitions:
            report.gate3_violations += 1
            report.find(
                f"GATE-3: batch {body['commandId']} of {partition.name} went out while {not_ready} were "
                f"NotReady (maxUnavailablePartitions {plan.max_unavailable_partitions})"
            )
        # GATE-1: a further batch of a partition only while fewer than maxUnavailable are unavailable
        first_key = (stage, track, partition.name, body["version"])
        if first_key in first_of_partition:
            unavailable = [c for c in partition.members if c not in clusters and certainly_unavailable(c, t)]
            if unavailable and len(unavailable) >= partition.max_unavailable:
                report.gate1_violations += 1
                report.find(
                    f"GATE-1: batch {body['commandId']} went out while {len(unavailable)} clusters of "
                    f"{partition.name} were certainly unavailable (maxUnavailable "
                    f"{partition.max_unavailable}): {unavailable[:8]}"
                )
        first_of_partition.add(first_key)
        for cluster in clusters:
            handouts[cluster].append((t, track))
