"""Stage membership and partitions (SEQ-2, SEQ-3, PART-2..4): pure, shared by the planner and `plan`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rollout_common.fleet import Cluster, ClusterGroup, groups_of
from rollout_common.labels import LabelMap
from rollout_common.quantity import resolve
from rollout_common.sequence import RolloutStrategy, Sequence, Stage


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    name: str
    clusters: tuple[str, ...]
    max_unavailable: int


@dataclass(slots=True)
class StagePlan:
    name: str
    members: list[str]
    partitions: list[PartitionPlan]
    no_partition: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Membership:
    """Which stage each cluster belongs to, and what could not be placed."""

    stage_of: dict[str, int]
    other_channel: list[str]
    conflicts: dict[str, list[str]]
    unmatched: list[str]


def assign_stages(sequence: Sequence, clusters: Iterable[Cluster], groups: Iterable[ClusterGroup] = ()) -> Membership:
    """SEQ-2: a cluster in two stages is reported, never silently resolved; it joins neither."""
    groups = tuple(groups)
    stage_of: dict[str, int] = {}
    other_channel: list[str] = []
    conflicts: dict[str, list[str]] = {}
    unmatched: list[str] = []
    for cluster in clusters:
        in_groups = groups_of(cluster, groups)
        matching = [i for i, s in enumerate(sequence.stages) if _selects(s, cluster, in_groups)]
        if cluster.channel != sequence.channel:
            if matching:
                other_channel.append(cluster.name)
            continue
        if len(matching) > 1:
            conflicts[cluster.name] = [sequence.stages[i].name for i in matching]
        elif matching:
            stage_of[cluster.name] = matching[0]
        else:
            unmatched.append(cluster.name)
    return Membership(stage_of, sorted(other_channel), conflicts, sorted(unmatched))


def _selects(stage: Stage, cluster: Cluster, groups: dict[str, LabelMap]) -> bool:
    return stage.selects(name=cluster.name, labels=cluster.labels, groups=groups)


def plan_partitions(stage: Stage, members: list[Cluster], groups: Iterable[ClusterGroup] = ()) -> StagePlan:
    """Partitions over every member, ordered by name (PART-4); manual ones in listed order (PART-2)."""
    ordered = sorted(members, key=lambda c: c.name)
    names = [c.name for c in ordered]
    strategy = stage.rollout_strategy
    if strategy.partitions:
        return _manual(stage.name, strategy, ordered, tuple(groups))
    return StagePlan(stage.name, names, _automatic(strategy, names), warnings=_warnings(stage.name, strategy))


def _automatic(strategy: RolloutStrategy, names: list[str]) -> list[PartitionPlan]:
    count = len(names)
    threshold = strategy.auto_partition_threshold
    if threshold == 0 or count < threshold:
        groups = [names]
    else:
        size = max(1, resolve(strategy.auto_partition_size, count))
        groups = [names[i : i + size] for i in range(0, count, size)]
    plans = []
    start = 0
    for group in groups:
        # Fleet's names: "All" for a single partition, else the index range each covers
        name = "All" if len(groups) == 1 else f"Partition {start} - {start + len(group)}"
        plans.append(PartitionPlan(name, tuple(group), resolve(strategy.max_unavailable, len(group))))
        start += len(group)
    return plans


def _manual(
    stage_name: str, strategy: RolloutStrategy, ordered: list[Cluster], groups: tuple[ClusterGroup, ...]
) -> StagePlan:
    taken: dict[str, str] = {}
    buckets: dict[str, list[str]] = {p.name: [] for p in strategy.partitions}
    warnings = _warnings(stage_name, strategy)
    for cluster in ordered:
        in_groups = groups_of(cluster, groups)
        hits = [p for p in strategy.partitions if p.matches(name=cluster.name, labels=cluster.labels, groups=in_groups)]
        if not hits:
            continue
        taken[cluster.name] = hits[0].name
        buckets[hits[0].name].append(cluster.name)
        if len(hits) > 1:
            others = ", ".join(p.name for p in hits[1:])
            warnings.append(
                f"stage {stage_name}: cluster {cluster.name} matches partitions {hits[0].name} and "
                f"{others}; it belongs to {hits[0].name} only (PART-2)"
            )
    partitions = []
    for spec in strategy.partitions:
        members = buckets[spec.name]
        limit = spec.max_unavailable if spec.max_unavailable is not None else strategy.max_unavailable
        partitions.append(PartitionPlan(spec.name, tuple(members), resolve(limit, len(members))))
    no_partition = [c.name for c in ordered if c.name not in taken]
    if no_partition:
        warnings.append(
            f"stage {stage_name}: {len(no_partition)} cluster(s) match no partition and will not be "
            f"upgraded (PART-2, NO_PARTITION): {', '.join(no_partition[:10])}"
        )
    names = [c.name for c in ordered if c.name in taken]
    return StagePlan(stage_name, names, partitions, no_partition=no_partition, warnings=warnings)


def _warnings(stage_name: str, strategy: RolloutStrategy) -> list[str]:
    if strategy.max_unavailable == "100%":
        return [
            f"stage {stage_name}: maxUnavailable is 100%, so partitions will not wait for readiness and "
            f"maxUnavailablePartitions has no effect (GATE-4)"
        ]
    return []
