"""Stage membership and partitions (SEQ-2, SEQ-3, PART-2..4): pure, shared by the planner and `plan`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Protocol

from rollout_common.fleet import ClusterGroup, groups_of
from rollout_common.quantity import resolve
from rollout_common.sequence import PartitionSpec, RolloutStrategy, Sequence, Stage
from rollout_planner.engine.model import ClusterProfile, ClusterRec


class Member(Protocol):
    """What placement reads of a cluster: a Cluster from the inventory, or the planner's record of one."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def channel(self) -> str: ...

    @property
    def group(self) -> str | None: ...

    @property
    def group_labels(self) -> Mapping[str, str]: ...


def _shared(member: Member) -> object | None:
    """Members with the same key are placed alike, but for selectors by name: records sharing a
    profile. A selector is then evaluated once per profile, not once per cluster."""
    return member.profile if isinstance(member, ClusterRec) else None


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


def assign_stages(sequence: Sequence, clusters: Iterable[Member], groups: Iterable[ClusterGroup] = ()) -> Membership:
    """SEQ-2: a cluster in two stages is reported, never silently resolved; it joins neither."""
    groups = tuple(groups)
    by_name = [i for i, s in enumerate(sequence.stages) if s.cluster_names is not None]
    if not by_name and isinstance(clusters, list) and all(isinstance(c, ClusterRec) for c in clusters[:1]):
        return _assign_records(sequence, clusters, groups)
    stage_of: dict[str, int] = {}
    other_channel: list[str] = []
    conflicts: dict[str, list[str]] = {}
    unmatched: list[str] = []
    for cluster, matching in _stages_selecting(sequence, clusters, groups, by_name=by_name):
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


def _stages_selecting(
    sequence: Sequence, clusters: Iterable[Member], groups: tuple[ClusterGroup, ...], *, by_name: list[int]
) -> Iterator[tuple[Member, list[int]]]:
    """Each cluster with the indexes of the stages that select it, in order; the selectors not by
    name are evaluated once per shared key (`_shared`), those by name for each cluster."""
    seen: dict[object, list[int]] = {}
    for cluster in clusters:
        key = _shared(cluster)
        found = seen.get(key) if key is not None else None
        if found is None:
            in_groups = groups_of(cluster, groups)
            found = [i for i, s in enumerate(sequence.stages) if _selects(s, cluster, in_groups)]
            if key is not None:
                seen[key] = [i for i in found if i not in by_name]
        elif by_name:
            named = [i for i in by_name if cluster.name in (sequence.stages[i].cluster_names or ())]
            found = sorted([*found, *named])
        yield cluster, found


def _assign_records(sequence: Sequence, records: list[ClusterRec], groups: tuple[ClusterGroup, ...]) -> Membership:
    """assign_stages for records when no stage selects by name: decided once per profile, then
    spread over the clusters with comprehensions (a million clusters share a handful of profiles)."""
    stage_at: dict[ClusterProfile, int] = {}
    other: set[ClusterProfile] = set()
    conflicting: dict[ClusterProfile, list[str]] = {}
    none: set[ClusterProfile] = set()
    # the first record of each profile stands for all of its profile
    samples = {r.profile: r for r in reversed(records)}
    for profile in dict.fromkeys(map(_profile_of, records)):
        sample = samples[profile]
        in_groups = groups_of(sample, groups)
        matching = [i for i, s in enumerate(sequence.stages) if _selects(s, sample, in_groups)]
        if profile.channel != sequence.channel:
            if matching:
                other.add(profile)
        elif len(matching) > 1:
            conflicting[profile] = [sequence.stages[i].name for i in matching]
        elif matching:
            stage_at[profile] = matching[0]
        else:
            none.add(profile)
    found = stage_at.get
    stage_of = {r.name: index for r in records if (index := found(r.profile)) is not None}
    return Membership(
        stage_of,
        sorted(r.name for r in records if r.profile in other) if other else [],
        {r.name: list(conflicting[r.profile]) for r in records if r.profile in conflicting} if conflicting else {},
        sorted(r.name for r in records if r.profile in none) if none else [],
    )


_profile_of = attrgetter("profile")
_name_of = attrgetter("name")


def _selects(stage: Stage, cluster: Member, groups: Mapping[str, Mapping[str, str]]) -> bool:
    return stage.selects(name=cluster.name, labels=cluster.labels, groups=groups)


def plan_partitions(stage: Stage, members: Collection[Member], groups: Iterable[ClusterGroup] = ()) -> StagePlan:
    """Partitions over every member, ordered by name (PART-4); manual ones in listed order (PART-2)."""
    names = sorted(map(_name_of, members))
    strategy = stage.rollout_strategy
    if strategy.partitions:
        if len(set(names)) == len(names):
            by_name = {c.name: c for c in members}
            ordered = [by_name[n] for n in names]
        else:  # the same name twice (never in a planner's state): the order of the given records decides
            ordered = sorted(members, key=lambda c: c.name)
        return _manual(stage.name, strategy, ordered, tuple(groups))
    return StagePlan(stage.name, names, _automatic(strategy, names), warnings=_warnings(stage.name, strategy))


def automatic_bounds(strategy: RolloutStrategy, count: int) -> list[tuple[int, int]]:
    """PART-3: the (start, end) positions of each automatic partition over `count` members in name order."""
    threshold = strategy.auto_partition_threshold
    if threshold == 0 or count < threshold:
        return [(0, count)]
    size = max(1, resolve(strategy.auto_partition_size, count))
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def automatic_name(bounds: list[tuple[int, int]], index: int) -> str:
    """Fleet's names: "All" for a single partition, else the index range each covers."""
    if len(bounds) == 1:
        return "All"
    start, end = bounds[index]
    return f"Partition {start} - {end}"


def _automatic(strategy: RolloutStrategy, names: list[str]) -> list[PartitionPlan]:
    bounds = automatic_bounds(strategy, len(names))
    plans = []
    for index, (start, end) in enumerate(bounds):
        group = names[start:end]
        plans.append(
            PartitionPlan(automatic_name(bounds, index), tuple(group), resolve(strategy.max_unavailable, len(group)))
        )
    return plans


def manual_matches(strategy: RolloutStrategy, member: Member, groups: Iterable[ClusterGroup]) -> list[int]:
    """PART-2: the positions of the manual partitions that select the member, in listed order."""
    in_groups = groups_of(member, groups)
    name, labels = member.name, member.labels
    return [i for i, p in enumerate(strategy.partitions) if p.matches(name=name, labels=labels, groups=in_groups)]


def manual_limit(strategy: RolloutStrategy, index: int, size: int) -> int:
    """A manual partition's maxUnavailable (its own, else the strategy's) resolved against its size."""
    spec = strategy.partitions[index]
    return resolve(spec.max_unavailable if spec.max_unavailable is not None else strategy.max_unavailable, size)


def _manual(
    stage_name: str, strategy: RolloutStrategy, ordered: list[Member], groups: tuple[ClusterGroup, ...]
) -> StagePlan:
    taken: dict[str, str] = {}
    buckets: dict[str, list[str]] = {p.name: [] for p in strategy.partitions}
    warnings = _warnings(stage_name, strategy)
    for cluster, hits in _partitions_matching(strategy, ordered, groups):
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
    partitions = [
        PartitionPlan(spec.name, tuple(buckets[spec.name]), manual_limit(strategy, index, len(buckets[spec.name])))
        for index, spec in enumerate(strategy.partitions)
    ]
    no_partition = [c.name for c in ordered if c.name not in taken]
    if no_partition:
        warnings.append(
            f"stage {stage_name}: {len(no_partition)} cluster(s) match no partition and will not be "
            f"upgraded (PART-2, NO_PARTITION): {', '.join(no_partition[:10])}"
        )
    names = [c.name for c in ordered if c.name in taken]
    return StagePlan(stage_name, names, partitions, no_partition=no_partition, warnings=warnings)


def _partitions_matching(
    strategy: RolloutStrategy, ordered: list[Member], groups: tuple[ClusterGroup, ...]
) -> Iterator[tuple[Member, list[PartitionSpec]]]:
    """Each cluster with the partitions whose selectors match it, in listed order; evaluated once per
    shared key (`_shared`) unless a partition selects by name."""
    by_name = any(p.cluster_name is not None for p in strategy.partitions)
    seen: dict[object, list[PartitionSpec]] = {}
    for cluster in ordered:
        key = None if by_name else _shared(cluster)
        found = seen.get(key) if key is not None else None
        if found is None:
            in_groups = groups_of(cluster, groups)
            found = [
                p for p in strategy.partitions if p.matches(name=cluster.name, labels=cluster.labels, groups=in_groups)
            ]
            if key is not None:
                seen[key] = found
        yield cluster, found


def _warnings(stage_name: str, strategy: RolloutStrategy) -> list[str]:
    if strategy.max_unavailable == "100%":
        return [
            f"stage {stage_name}: maxUnavailable is 100%, so partitions will not wait for readiness and "
            f"maxUnavailablePartitions has no effect (GATE-4)"
        ]
    return []
