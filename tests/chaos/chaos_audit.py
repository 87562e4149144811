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

Membership (SEQ-6) is taken from the planner's own `SEQ-6` notices on the progress topic: the
topic is one partition written in decision order, so a notice before a batch is a change the
planner had applied when it decided that batch. Partitions are recomputed from that membership
with the stage's strategy (PART-3, PART-4), as the shared conformance checker does.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from rollout_common.commands import StageAdvance
from rollout_common.events import Readiness, UpgradeResult

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
    """A record whose value is not a JSON object (the schedule injects such) gets an empty body."""
    text = {name: (data or b"").decode(errors="replace") for name, data in headers}
    try:
        body = json.loads(value) if value else {}
    except (ValueError, RecursionError):
        body = {}
    return Rec(topic, partition, offset, ts_ms, text, body if isinstance(body, dict) else {})


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    name: str
    members: tuple[str, ...]
    max_unavailable: int


@dataclass(frozen=True, slots=True)
class StagePlan:
    """A stage as the fleet defines it: its strategy and its members at the start."""

    name: str
    strategy: Mapping[str, Any]
    members: tuple[str, ...]

    @property
    def max_new(self) -> int:
        return int(self.strategy.get("maxNew", 50))

    @property
    def max_unavailable_partitions(self) -> int:
        return int(self.strategy.get("maxUnavailablePartitions", 0))

    def partitions(self, members: Iterable[str] | None = None) -> list[PartitionPlan]:
        return auto_partitions(list(self.members if members is None else members), self.strategy)


@dataclass(frozen=True, slots=True)
class GateSample:
    """A partition's unavailable count (GATE-1) at one instant, as far as the planner certainly knew."""

    t_ms: int
    unavailable: int
    max_unavailable: int


@dataclass
class Audit:
    findings: list[str] = field(default_factory=list)
    succeeded_keys: int = 0
    duplicates: int = 0  # (cluster, track, version) whose upgrade took effect more than once (driver's record)
    completions: int = 0  # upgrades that took effect, as the driver recorded them
    reruns: int = 0  # (cluster, track, version) whose driver was started more than once (`started` results)
    explained_reruns: int = 0  # of those, the ones an executor kill mid-upgrade explains
    missing: int = 0  # cluster-tracks never upgraded (no `succeeded`, or the driver never completed one)
    missing_keys: set[tuple[str, str]] = field(default_factory=set)
    batches: int = 0
    batches_gate_checked: int = 0  # batches whose partition and gates were rebuilt and checked
    gate1_checks: int = 0  # further batches of a partition, checked against its unavailable count
    gate3_checks: int = 0  # batches of a partition after the first, checked against the earlier ones
    oversize_batches: int = 0
    gate1_violations: int = 0
    gate3_violations: int = 0
    decided_twice: int = 0
    completed_tracks: int = 0
    membership_changes: int = 0  # SEQ-6 notices that changed a cluster's stage after the start
    removed: list[str] = field(default_factory=list)
    final_stage_of: dict[str, str] = field(default_factory=dict)  # membership the notices end on
    # "stage/position" -> the partition's unavailable count at every batch of its stage and every
    # result or readiness of its members (the GATE-1 timeline)
    timeline: dict[str, list[GateSample]] = field(default_factory=dict)

    def find(self, text: str) -> None:
        self.findings.append(text)

    @property
    def gate_violations(self) -> int:
        return self.gate1_violations + self.gate3_violations

    @property
    def peak_unavailable(self) -> dict[str, tuple[int, int]]:
        """Per partition: the most clusters it ever had certainly unavailable, and its maxUnavailable."""
        return {
            key: max(((s.unavailable, s.max_unavailable) for s in samples), default=(0, 0))
            for key, samples in self.timeline.items()
        }


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


def world_completions(path: Path) -> Counter[tuple[str, str, str]]:
    """How often each (cluster, track, version) upgrade took effect, from the simulated driver's
    world file (a line `cluster track version fencing-token` per completed upgrade)."""
    found: Counter[tuple[str, str, str]] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        cluster, track, version, *_ = line.split()
        found[(cluster, track, version)] += 1
    return found


def _valid(model: type[BaseModel], body: Mapping[str, Any]) -> bool:
    try:
        model.model_validate(body)
    except ValidationError:
        return False
    return True


_MOVED = re.compile(r"^cluster (?P<name>\S+) moved from (?P<before>.+) to (?P<after>.+)$")
_LEFT = re.compile(r"^cluster (?P<name>\S+) left the inventory$")
_NO_STAGE = "no stage"


@dataclass
class Membership:
    """Which stage each cluster is in, as the planner's SEQ-6 notices say, applied in their order."""

    stage_of: dict[str, str]
    removed: set[str] = field(default_factory=set)
    changes: int = 0

    @classmethod
    def start(cls, plans: Mapping[str, StagePlan]) -> Membership:
        return cls({c: stage for stage, plan in plans.items() for c in plan.members})

    def apply(self, notice: Mapping[str, Any]) -> bool:
        """Apply one notice; True when it changed a cluster's stage or removed it."""
        if notice.get("code") != "SEQ-6":
            return False
        message = str(notice.get("message", ""))
        if left := _LEFT.match(message):
            name = left["name"]
            self.removed.add(name)
            changed = self.stage_of.pop(name, None) is not None
        elif moved := _MOVED.match(message):
            name, after = moved["name"], moved["after"]
            self.removed.discard(name)
            before = self.stage_of.get(name)
            if after == _NO_STAGE:
                self.stage_of.pop(name, None)
            else:
                self.stage_of[name] = after
            changed = before != self.stage_of.get(name)
        else:
            return False
        self.changes += changed
        return changed

    def members(self, stage: str) -> list[str]:
        return sorted(c for c, s in self.stage_of.items() if s == stage)


def decision_stream(progress: Sequence[Rec], stage_advance: Sequence[Rec]) -> list[tuple[int, dict[str, Any]]]:
    """The planner's batches (first publication, with the earliest timestamp of either topic) and
    SEQ-6 notices, in decision order; a record re-published after a restart counts once."""
    earliest: dict[str, int] = {}
    for rec in stage_advance:
        cid = rec.body.get("commandId")
        if isinstance(cid, str):
            earliest[cid] = min(earliest.get(cid, rec.ts_ms), rec.ts_ms)
    seen: set[str] = set()
    stream = []
    for rec in progress:
        kind = rec.body.get("kind")
        if kind == "stage_advance":
            key = rec.body["commandId"]
            at = min(earliest.get(key, rec.ts_ms), rec.ts_ms)
        elif kind == "notice" and rec.body.get("code") == "SEQ-6":
            key, at = f"notice {rec.ce_id}", rec.ts_ms
        else:
            continue
        if key in seen:
            continue
        seen.add(key)
        stream.append((at, dict(rec.body)))
    return stream


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
    completions: Mapping[tuple[str, str, str], int] | None = None,
) -> Audit:
    """`completions`: how often each (cluster, track, version) upgrade took effect, as the driver
    itself recorded it, independent of what the executors claimed or published; None when the
    driver keeps no such record (then no duplicate can be counted)."""
    report = Audit()
    # records the services dead-letter (the schedule injects such) are no facts
    results = [r for r in results if _valid(UpgradeResult, r.body)]
    stage_advance = [r for r in stage_advance if _valid(StageAdvance, r.body)]
    readiness = [r for r in readiness if _valid(Readiness, r.body)]
    stream = decision_stream(progress, stage_advance)
    batches = [(t, body) for t, body in stream if body["kind"] == "stage_advance"]
    report.batches = len(batches)
    final = Membership.start(plans)
    for _, body in stream:
        final.apply(body)
    report.removed = sorted(final.removed)
    report.final_stage_of = dict(final.stage_of)
    # what must be upgraded: the members at the end (a removed cluster need not be)
    every = {(c, t) for c in final.stage_of for t in TRACKS}

    _check_completion(report, plans, version, progress)
    _check_batches_on_both_topics(report, progress, stage_advance)
    _check_decided_once(report, every, batches)
    _check_upgrades(report, every, version, results, executor_kills, lease_s)
    if completions is not None:
        _check_completions(report, every, version, completions)
    _check_gates(report, plans, stream, results, readiness)
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
    """A `succeeded` result per cluster, track and version, none missing; driver runs counted.

    A driver run is announced by one `started` result. The executor encodes a result once and
    retries only the publish, so a record repeated by a producer retry has the same ce_id *and*
    ce_time, while a second run of the driver is encoded afresh: distinct (ce_id, ce_time) pairs
    of `started` count the driver runs. A second run is allowed only where the executor that
    started the first one was SIGKILLed between the two (it died mid-upgrade, before recording
    its result; its lease then expired and the next executor started again). Whether a run took
    effect twice is the driver's record's to say (`_check_completions`), not the topics'.
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
    report.missing_keys = set(missing)
    report.missing = len(missing)
    for key in missing[:10]:
        report.find(f"{key[0]} {key[1]} never upgraded to {version}")
    _count_reruns(report, starts, executor_kills)


def _count_reruns(
    report: Audit,
    starts: Mapping[tuple[str, str, str], Mapping[tuple[str, float], str]],
    executor_kills: Mapping[str, Sequence[float]],
) -> None:
    """A driver started again is no duplicate by itself (a run interrupted before it did anything,
    then one whole run, is one upgrade), but it is allowed only after its first executor was killed."""
    for key, runs in sorted(starts.items()):
        if len(runs) <= 1:
            continue
        report.reruns += 1
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
            report.explained_reruns += 1


def _check_completions(
    report: Audit, every: set[tuple[str, str]], version: str, completions: Mapping[tuple[str, str, str], int]
) -> None:
    """Every cluster and track upgraded to `version` exactly once, by the driver's own record: more
    is a duplicate whatever explains it, none is an upgrade lost even if a result said succeeded."""
    report.completions = sum(completions.values())
    for key, times in sorted(completions.items()):
        if times > 1:
            report.duplicates += 1
            report.find(f"{key} took effect {times} times (the driver's record of completed upgrades)")
    never = sorted(key for key in every if completions.get((*key, version), 0) == 0)
    report.missing_keys |= set(never)
    report.missing = len(report.missing_keys)
    for key in never[:10]:
        report.find(f"{key[0]} {key[1]} never took effect on {version} (the driver's record)")


# -- the gates: every partition's unavailable count rebuilt over time ------------------------------

_NEVER = 2**62


@dataclass
class _Facts:
    """What the upgrade-results and readiness topics say, by record timestamp."""

    succeeded_at: dict[tuple[str, str], int] = field(default_factory=dict)  # earliest `succeeded`
    result_at: dict[tuple[str, str], int] = field(default_factory=dict)  # earliest final result
    ready_at: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    handouts: dict[str, list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def of(cls, results: Sequence[Rec], readiness: Sequence[Rec]) -> _Facts:
        facts = cls()
        for rec in results:
            key = (rec.body["cluster"], rec.body["track"])
            if rec.body["outcome"] in ("succeeded", "failed"):
                facts.result_at[key] = min(facts.result_at.get(key, rec.ts_ms), rec.ts_ms)
            if rec.body["outcome"] == "succeeded":
                facts.succeeded_at[key] = min(facts.succeeded_at.get(key, rec.ts_ms), rec.ts_ms)
        for rec in readiness:
            if rec.body.get("ready") is True:
                facts.ready_at[rec.body["cluster"]].append(rec.ts_ms)
        return facts

    def certainly_unavailable(self, cluster: str, t: int) -> bool:
        """Handed out before t, and the planner cannot have seen it succeed and then report ready:
        no `succeeded` produced before t, or no `ready: true` between its last handout and t."""
        before = [(h, track) for h, track in self.handouts[cluster] if h < t]
        if not before:
            return False
        if any(self.succeeded_at.get((cluster, track), _NEVER) >= t for _, track in before):
            return True
        last = max(h for h, _ in before)
        return not any(last < r < t for r in self.ready_at[cluster])

    def certainly_in_flight(self, cluster: str, t: int) -> bool:
        """Its last handout before t has no final result produced before t (SEQ-6a)."""
        before = [(h, track) for h, track in self.handouts[cluster] if h < t]
        return bool(before) and self.result_at.get((cluster, max(before)[1]), _NEVER) >= t

    def certainly_not_done(self, cluster: str, track: str, t: int) -> bool:
        """GATE-2's not done, as far as the planner certainly knew: no `succeeded` before t."""
        return self.succeeded_at.get((cluster, track), _NEVER) >= t


@dataclass
class _GateBook:
    """The state the walk through the planner's decisions carries."""

    plans: Mapping[str, StagePlan]
    facts: _Facts
    membership: Membership
    last_handed: dict[str, tuple[str, int]] = field(default_factory=dict)  # cluster -> (stage, position)
    first_sent: set[tuple[str, str, str, int]] = field(default_factory=set)  # (stage, track, version, position)

    def partitions(self, stage: str) -> list[PartitionPlan]:
        return self.plans[stage].partitions(self.membership.members(stage))

    def unavailable(self, stage: str, position: int, t: int, *, besides: Iterable[str] = ()) -> list[str]:
        """GATE-1's unavailable count of the partition at `position`: its members handed out and not
        certainly back to ready, and the clusters it handed out that left it while their upgrade
        is still in flight (FORMAT.md), other than `besides` (the batch being decided)."""
        parts = self.partitions(stage)
        if position >= len(parts):
            return []
        members, skip = set(parts[position].members), set(besides)
        found = [c for c in sorted(members - skip) if self.facts.certainly_unavailable(c, t)]
        found += [
            c
            for c, where in sorted(self.last_handed.items())
            if where == (stage, position)
            and c not in members
            and c not in skip
            and self.facts.certainly_in_flight(c, t)
        ]
        return found

    def sample(self, report: Audit, stage: str, position: int, t: int) -> None:
        parts = self.partitions(stage)
        if position < len(parts):
            report.timeline.setdefault(f"{stage}/{position}", []).append(
                GateSample(t, len(self.unavailable(stage, position, t)), parts[position].max_unavailable)
            )


def _check_gates(
    report: Audit,
    plans: Mapping[str, StagePlan],
    stream: Sequence[tuple[int, dict[str, Any]]],
    results: Sequence[Rec],
    readiness: Sequence[Rec],
) -> None:
    """Walk the planner's decisions in order, rebuilding membership, partitions and every
    partition's unavailable count, and check each batch against GATE-1 and GATE-3 as they were
    when it was decided (SPEC GATE-1..3, FORMAT.md's reading of them under membership changes)."""
    book = _GateBook(plans, _Facts.of(results, readiness), Membership.start(plans))
    # results and readiness move a partition's count down: sampled just after each, in time order
    changes = sorted(
        [(at + 1, key[0]) for key, at in book.facts.result_at.items()]
        + [(at + 1, c) for c, times in book.facts.ready_at.items() for at in times]
    )
    pending = 0
    for t, body in stream:
        while pending < len(changes) and changes[pending][0] <= t:
            at, cluster = changes[pending]
            pending += 1
            if (stage := book.membership.stage_of.get(cluster)) in plans:
                position = next((i for i, p in enumerate(book.partitions(stage)) if cluster in p.members), None)
                if position is not None:
                    book.sample(report, stage, position, at)
        if body["kind"] == "notice":
            book.membership.apply(body)
            continue
        _check_batch(report, book, t, body)
    report.membership_changes = book.membership.changes


def _check_batch(report: Audit, book: _GateBook, t: int, body: Mapping[str, Any]) -> None:
    stage, track, clusters, cid = body["stage"], body["track"], body["clusters"], body["commandId"]
    plan = book.plans.get(stage)
    if plan is None:
        report.find(f"batch {cid} names unknown stage {stage!r}")
        return
    if len(clusters) > plan.max_new:
        report.oversize_batches += 1
        report.find(f"batch {cid} has {len(clusters)} clusters, maxNew is {plan.max_new}")
    parts = book.partitions(stage)
    position = next((i for i, p in enumerate(parts) if set(clusters) <= set(p.members)), None)
    if position is None:
        report.find(
            f"batch {cid} hands out {clusters[:8]}, not all members of one partition of {stage} at the time "
            f"(SEQ-6/SEQ-6a): partitions {[p.name for p in parts]}"
        )
    else:
        partition = parts[position]
        if body.get("partition") != partition.name:
            report.find(f"batch {cid} says partition {body.get('partition')!r}, its clusters are in {partition.name!r}")
        report.batches_gate_checked += 1
        if position > 0:
            # GATE-3: the earlier partitions the planner certainly saw NotReady (GATE-2)
            report.gate3_checks += 1
            not_ready = [
                p.name
                for p in parts[:position]
                if sum(book.facts.certainly_not_done(c, track, t) for c in p.members) > p.max_unavailable
            ]
            if len(not_ready) > plan.max_unavailable_partitions:
                report.gate3_violations += 1
                report.find(
                    f"GATE-3: batch {cid} of {partition.name} went out while {not_ready} were NotReady "
                    f"(maxUnavailablePartitions {plan.max_unavailable_partitions})"
                )
        # GATE-1: the first batch of a partition (by position) is free once per track and version
        first_key = (stage, track, body["version"], position)
        if first_key in book.first_sent:
            report.gate1_checks += 1
            unavailable = book.unavailable(stage, position, t, besides=clusters)
            if unavailable and len(unavailable) >= partition.max_unavailable:
                report.gate1_violations += 1
                report.find(
                    f"GATE-1: batch {cid} went out while {len(unavailable)} clusters of {partition.name} were "
                    f"certainly unavailable (maxUnavailable {partition.max_unavailable}): {unavailable[:8]}"
                )
        book.first_sent.add(first_key)
        book.sample(report, stage, position, t)
    for cluster in clusters:
        book.facts.handouts[cluster].append((t, track))
        if position is not None:
            book.last_handed[cluster] = (stage, position)
    if position is not None:
        book.sample(report, stage, position, t + 1)
