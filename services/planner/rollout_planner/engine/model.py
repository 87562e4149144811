"""The engine's runtime records. Plain slotted classes: they hold per-cluster data for whole fleets."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from rollout_common.check_results import CheckOutcome
from rollout_common.commands import Command
from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.gates import GatePosition
from rollout_common.sequence import Sequence, Stage
from rollout_common.status import RolloutState, StageState
from rollout_common.version import Minor, Version

CP = 0
NODES = 1
TRACK_INDEXES = (CP, NODES)
MAX_UPGRADE_TIME = 30 * 86400.0


T = TypeVar("T")


def put(old: tuple[T, T], track: int, value: T) -> tuple[T, T]:
    """The pair with one track's value replaced: a shared pair (`pair`), so equal pairs are one object."""
    return pair(value, old[1]) if track == 0 else pair(old[0], value)


def put_count(old: tuple[int, int], track: int, value: int) -> tuple[int, int]:
    """A per-track count pair with one track's value replaced (shared, as `put`)."""
    return put(old, track, value)


class ClusterProfile:
    """What the engine reads of a cluster's inventory record besides its name and versions.

    Clusters with the same labels, channel, groups, windows and API usage share one profile (a fleet
    has few), so the state keeps no inventory model per cluster and selectors are evaluated once per
    profile. Read-only once made: an inventory change gives the cluster another profile.
    """

    __slots__ = (
        "channel",
        "deprecated_api_usage",
        "exclusions",
        "group",
        "group_labels",
        "labels",
        "maintenance_window",
    )

    def __init__(self, spec: Cluster) -> None:
        self.labels: Mapping[str, str] = spec.labels
        self.channel = spec.channel
        self.group = spec.group
        self.group_labels: Mapping[str, str] = spec.group_labels
        self.maintenance_window = spec.maintenance_window
        self.exclusions = spec.exclusions
        self.deprecated_api_usage = spec.deprecated_api_usage


def profile_key(spec: Cluster) -> Hashable:
    """Equal for clusters that differ only in name and versions."""
    window, exclusions = spec.maintenance_window, spec.exclusions
    key = (
        tuple(spec.labels.items()),
        spec.channel,
        spec.group,
        tuple(spec.group_labels.items()) if spec.group_labels else (),
        window,
        exclusions,
        spec.deprecated_api_usage,
    )
    if window is not None or exclusions:
        try:
            hash(key)
        except TypeError:  # a window model that cannot be hashed: a profile of its own
            return ("unshared", spec.name)
    return key


_PAIRS: dict[tuple[object, object], tuple[object, object]] = {}
_TYPED_PAIRS: dict[tuple[object, ...], tuple[object, object]] = {}


def pair(first: T, second: T) -> tuple[T, T]:
    """One shared tuple per distinct pair: a million clusters on two versions hold two pair objects.

    A cache of immutable values, like string interning: it changes no result."""
    key = (first, second)
    found = _PAIRS.get(key)
    if found is None:
        if len(_PAIRS) < 100_000:  # distinct pairs are few; never let odd inputs grow it unbounded
            _PAIRS[key] = key
        return key
    if type(found[0]) is not type(first) or type(found[1]) is not type(second):
        # equal but not the same kind of value (False and 0): never swapped for each other
        typed = (type(first), type(second), first, second)
        found = _TYPED_PAIRS.get(typed)
        if found is None:
            found = _TYPED_PAIRS[typed] = key
    return found  # type: ignore[return-value]


NO_PAIR: tuple[None, None] = pair(None, None)
NO_RETRIES: tuple[int, int] = pair(0, 0)
NO_FLAGS: tuple[bool, bool] = pair(False, False)
# every pair of flags, each the shared one
FLAGS: dict[tuple[bool, bool], tuple[bool, bool]] = {
    pair(a, b): pair(a, b) for a in (False, True) for b in (False, True)
}
NOT_DONE_BY: tuple[frozenset[str], frozenset[str]] = pair(frozenset(), frozenset())
NO_VERSIONS: tuple[Version, Version] = pair(Version((0, 0, 0, 0), "0.0.0"), Version((0, 0, 0, 0), "0.0.0"))


_PAIR_FIELDS = frozenset(
    (
        "done_by",
        "failed",
        "floor",
        "mismatch",
        "not_done",
        "origin",
        "queued",
        "retries",
        "running",
        "running_cmd",
        "target",
        "target_run",
        "upgraded_at",
        "versions",
        "waiting_until",
    )
)


class ClusterRec:
    """What the planner knows of one cluster; per-track fields are shared 2-tuples indexed by CP / NODES,
    replaced whole (`put`), never mutated."""

    __slots__ = (
        "available",
        "awaiting_ready",
        "done_by",
        "failed",
        "finished_at",
        "floor",
        "mismatch",
        "name",
        "not_done",
        "observed_at",
        "origin",
        "partition",
        "profile",
        "queued",
        "ready",
        "retries",
        "running",
        "running_cmd",
        "stage",
        "target",
        "target_run",
        "upgraded_at",
        "versions",
        "waiting_until",
    )

    # What each field holds (its type, said once here; `__init__` gives its starting value).
    # Fields at their usual value share one immutable pair until written: a fleet of a million
    # clusters then carries no per-cluster copies of "nothing yet".
    name: str
    profile: ClusterProfile
    stage: int | None
    partition: int | None
    versions: tuple[Version, Version]
    ready: bool
    running: tuple[Version | None, Version | None]
    running_cmd: tuple[str | None, str | None]
    awaiting_ready: bool
    failed: tuple[str | None, str | None]
    target: tuple[Version | None, Version | None]
    target_run: tuple[str | None, str | None]
    done_by: tuple[frozenset[str], frozenset[str]]
    queued: tuple[bool, bool]
    waiting_until: tuple[float | None, float | None]
    available: bool
    not_done: tuple[bool, bool]
    # per track: (stage, partition index) that handed out the upgrade in flight; it keeps the
    # slot there until the result, wherever the cluster belongs meanwhile (SEQ-6a, GATE-1)
    origin: tuple[tuple[int, int] | None, tuple[int, int] | None]
    retries: tuple[int, int]  # OPS-4: retries of the current target, per track
    observed_at: float | None  # BUS-7: newest readiness observation applied
    finished_at: float | None  # BUS-7: when the last upgrade result says it finished
    # per track: the version the cluster reports running when it is not the one its succeeded
    # upgrade went to (VERSION_MISMATCH); the shared empty pair while none disagrees
    mismatch: tuple[Version | None, Version | None]
    # CHK-4, per track: when its last upgrade finished (the inventory's or ours, the later one)
    upgraded_at: tuple[float | None, float | None]
    # per track: the highest version the planner knew the cluster on, kept when the inventory
    # reports a lower one; no upgrade goes below it (START-3: never to a lower version)
    floor: tuple[Version | None, Version | None]

    def __init__(self, name: str, profile: ClusterProfile, versions: tuple[Version, Version]) -> None:
        self.name = name
        self.profile = profile
        self.stage = None
        self.partition = None
        self.versions = versions
        self.ready = True
        self.running = NO_PAIR
        self.running_cmd = NO_PAIR
        self.awaiting_ready = False
        self.failed = NO_PAIR
        self.target = NO_PAIR
        self.target_run = NO_PAIR
        self.done_by = NOT_DONE_BY
        self.queued = NO_FLAGS
        self.waiting_until = NO_PAIR
        self.available = True
        self.not_done = NO_FLAGS
        self.origin = NO_PAIR
        self.retries = NO_RETRIES
        self.observed_at = None
        self.finished_at = None
        self.mismatch = NO_PAIR
        self.upgraded_at = NO_PAIR
        self.floor = NO_PAIR

    # A copy (pickle: the planner's trial decisions) would hold copies of the shared pairs, which
    # identity checks (`is NO_PAIR`) would take for other values: a copy shares them again.
    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in ClusterRec.__slots__)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        for name, value in zip(ClusterRec.__slots__, state, strict=True):
            if name in _PAIR_FIELDS and isinstance(value, tuple):
                value = pair(value[0], value[1])
            setattr(self, name, value)

    # what stage and partition selectors read (partitioning.Member)
    @property
    def labels(self) -> Mapping[str, str]:
        return self.profile.labels

    @property
    def channel(self) -> str:
        return self.profile.channel

    @property
    def group(self) -> str | None:
        return self.profile.group

    @property
    def group_labels(self) -> Mapping[str, str]:
        return self.profile.group_labels

    @property
    def busy(self) -> bool:
        return self.running is not NO_PAIR and (self.running[CP] is not None or self.running[NODES] is not None)

    def compute_available(self) -> bool:
        # GATE-1 counts as unavailable a cluster "handed out and not yet reported ready on the new
        # version": one whose upgrade succeeded but which reports another version is exactly that,
        # so it holds its partition's batches (and is not done for GATE-2) until it reports the
        # version, as a cluster that never reported ready after its upgrade would.
        return (
            self.ready
            and not self.awaiting_ready
            and self.failed is NO_PAIR
            and self.mismatch is NO_PAIR
            and (self.running is NO_PAIR or (self.running[CP] is None and self.running[NODES] is None))
        )

    def leave_run(self, track: int, run: Run | None) -> None:
        """The cluster no longer counts towards `run`, the run that targeted it on the track (it
        left the stage): its target and the retries spent on it go (SEQ-6a)."""
        if run is not None:
            run.remaining -= 1
            run.overtaken = False  # it left the stage: no newer rollout took it (SOAK-4c)
        self.target = put(self.target, track, None)
        self.target_run = put(self.target_run, track, None)
        self.retries = put_count(self.retries, track, 0)


class PartitionRec:
    __slots__ = (
        "departed",
        "index",
        "max_unavailable",
        "members",
        "name",
        "not_done",
        "pending",
        "queued_unavailable",
        "unavailable",
    )

    def __init__(self, *, index: int, name: str, members: list[str], max_unavailable: int) -> None:
        self.index = index
        self.name = name
        self.members = members
        self.max_unavailable = max_unavailable
        self.unavailable = 0
        self.not_done = [0, 0]
        # per track: queued clusters that are themselves unavailable, so GATE-1 can refuse in O(1)
        self.queued_unavailable = [0, 0]
        # per track: version -> heap of cluster names waiting for a batch slot (name order, PART-4)
        self.pending: list[dict[Version, list[str]]] = [{}, {}]
        # clusters it handed out that left it (relabelled, moved, removed) and still upgrade: they
        # hold their slot here until their result (SEQ-6a), on top of `unavailable`
        self.departed = 0

    def push(self, track: int, version: Version, name: str) -> None:
        heapq.heappush(self.pending[track].setdefault(version, []), name)

    @property
    def holding(self) -> int:
        """GATE-1's unavailable count: its unavailable members and the in-flight clusters that left."""
        return self.unavailable + self.departed

    def not_ready(self, track: int) -> bool:
        """GATE-2: more clusters not done than maxUnavailable."""
        return self.not_done[track] > self.max_unavailable


@dataclass(slots=True)
class Offer:
    """A version that reached a stage's track: release targets (first stage) or a qualified version."""

    rollout_id: str
    version: Version | None = None
    by_minor: dict[Minor, Version] | None = None
    on_demand: bool = False


# the run states in which a run hands out batches (see Run.dispatchable)
# A run waiting at its `after` gate (CHK-1) hands out to its stragglers as a soaking one does; one
# waiting at its `before` gate targets no cluster yet, so it has nothing to hand out.
_HANDING_OUT = frozenset(
    (
        StageState.IN_PROGRESS,
        StageState.SOAKING,
        StageState.FORCED_SOAKING,
        StageState.AWAITING_APPROVAL,
        StageState.COMPLETE,
    )
)


@dataclass(slots=True)
class Run:
    """One rollout's run of one track through one stage (STAT-2)."""

    rollout_id: str
    stage: int
    track: int
    state: StageState
    reason: str
    opened_at: float
    started_at: float | None = None
    finished_at: float | None = None
    soak_started: float | None = None
    soak_end: float | None = None
    forced: bool = False
    working: set[Version] = field(default_factory=set)
    upgraded: set[Version] = field(default_factory=set)
    remaining: int = 0
    # SOAK-4c: the last cluster it had left to upgrade went to a newer rollout (a cluster it upgrades
    # or takes on itself clears it): with nothing left, such a run is overtaken, not finished
    overtaken: bool = False
    failures: int = 0
    qualified: Version | None = None
    offered: Version | None = None
    # a node run opened before the control plane's run reached the stage waits for it (SOAK-1)
    awaiting_cp: bool = False
    # what the run offers the stage's members; withdrawn when the run is cancelled (SOAK-4c)
    offer: Offer | None = None
    # CHK-1: the offer a run waiting for its stage's `before` approval takes up once approved
    held_offer: Offer | None = None
    # GATE-1: the partitions (by position) whose ungated first batch this run has used
    first_batches: set[int] = field(default_factory=set)
    prior: StageState | None = None  # the state it came from, for the audit's transition check

    @property
    def offering(self) -> bool:
        return self.offer is not None and self.state is not StageState.CANCELLED

    @property
    def active(self) -> bool:
        return self.state in (StageState.IN_PROGRESS, StageState.PAUSED)

    @property
    def dispatchable(self) -> bool:
        """IN_PROGRESS, or past it with stragglers: a run that has soaked or completed still hands out
        to the clusters it targets, the ones its forced soak left behind (SOAK-4) and late members
        that joined the stage after it finished (SEQ-6a). Neither changes its state or what it
        qualified."""
        return self.state in _HANDING_OUT

    @property
    def soaking(self) -> bool:
        return self.state in (StageState.SOAKING, StageState.FORCED_SOAKING)

    @property
    def terminal(self) -> bool:
        return self.state in (StageState.COMPLETE, StageState.CANCELLED)


class StageRec:
    __slots__ = (
        "forced_run",
        "handed",
        "index",
        "members",
        "no_partition",
        "partitions",
        "runs",
        "spec",
        "wait_keys",
        "waits",
    )

    def __init__(self, *, index: int, spec: Stage) -> None:
        self.index = index
        self.spec = spec
        self.members: list[str] = []
        self.partitions: list[PartitionRec] = []
        self.no_partition: list[str] = []
        self.runs: list[dict[str, Run]] = [{}, {}]
        self.forced_run: list[str | None] = [None, None]
        # upgrades this stage handed out that have not reported back: (cluster, track) -> partition
        # position. They hold maxConcurrent slots and their partition's GATE-1 count (SEQ-6a).
        self.handed: dict[tuple[str, int], int] = {}
        # per track: why the last dispatch held back, as (rule, partition, numbers) tuples (STAT-5)
        self.waits: list[list[tuple[str, str | None, dict[str, object]]]] = [[], []]
        self.wait_keys: list[tuple[tuple[str, str | None], ...]] = [(), ()]

    @property
    def in_flight(self) -> int:
        return len(self.handed)

    def offers(self, track: int) -> list[Offer]:
        """The versions runs hold out to this stage's members on a track (a cancelled run holds none)."""
        return [r.offer for r in self.runs[track].values() if r.offer is not None and r.offering]

    def latest_run(self, track: int) -> Run | None:
        runs = self.runs[track]
        return next(reversed(runs.values())) if runs else None


@dataclass(slots=True)
class RolloutRec:
    id: str
    event_id: str
    created_at: float
    by_minor: dict[Minor, Version] | None = None
    version: Version | None = None
    tracks: tuple[int, ...] = TRACK_INDEXES
    state: RolloutState = RolloutState.RUNNING
    paused: bool = False
    reason: str = "started"

    @property
    def number(self) -> int:
        """Creation order: ids are `<sequence>-<n>` with n counting from 1 (a newer rollout has a larger n)."""
        return int(self.id.rsplit("-", 1)[1])

    @property
    def on_demand(self) -> bool:
        return self.version is not None

    def versions(self) -> list[Version]:
        if self.version is not None:
            return [self.version]
        return sorted(set((self.by_minor or {}).values()))


def hands_out(run: Run, rollout: RolloutRec) -> bool:
    """Whether the run hands out batches now (pause aside): IN_PROGRESS; past it, the clusters its
    forced soak left behind (SOAK-4), and late members (SEQ-6a) only while its rollout is active: a
    rollout that has ended or was cancelled starts nothing new."""
    if run.state is StageState.IN_PROGRESS:
        return True
    if not run.dispatchable:
        return False
    return run.forced or rollout.state in (RolloutState.RUNNING, RolloutState.PAUSED)


# CHK-1: a gate belongs to a rollout, a stage (by name) and a position
GateKey = tuple[str, str, GatePosition]


@dataclass(slots=True)
class GateRec:
    """An approval gate some run of the rollout reached at the stage: since when, who approved it when."""

    reached_at: float
    approved_at: float | None = None
    approved_by: str | None = None
    comment: str | None = None


# CHK-2: a check's series belongs to a rollout, a stage (by name) and the check (by name)
CheckKey = tuple[str, str, str]


@dataclass(slots=True)
class CheckRec:
    """What the planner knows of one check of a rollout at a stage (CHK-2).

    `since` is when its running series started (None: no series runs); the latest result and the
    counts in a row belong to that series. `observed_at` is the newest observation applied, kept
    across series so an older result is never applied (BUS-7)."""

    since: float | None = None
    interval: float = 1.0  # the check's interval when its series last started (announced at its end)
    observed_at: float | None = None
    outcome: CheckOutcome | None = None
    value: float | None = None
    failed: int = 0
    inconclusive: int = 0


@dataclass(order=True, slots=True)
class Timer:
    """Due at `at`; at one instant, stages in order and control planes before nodes (SOAK-1)."""

    at: float
    rank: tuple[int, int] = (0, 0)
    kind: str = field(default="", compare=False)  # "soak", "deadline" (a run's) or "cluster" (a window)
    track: int = field(default=0, compare=False)
    ref: str = field(default="", compare=False)  # the run's rollout id, or the cluster's name
    stage: int = field(default=-1, compare=False)


@dataclass(slots=True)
class UnknownName:
    """A cluster name the engine does not know, said in a notice at `at`; `held`: events since."""

    at: float
    held: int = 0


@dataclass(slots=True)
class UnknownClusters:
    """What the UNKNOWN_CLUSTER notices said (`engine/unknown_clusters.py`): kept in the snapshot, so a
    restarted planner does not say again a name it said within the period."""

    interval_s: float = 3600.0  # the planner's setting, given before each decision; not stored
    max_names: int = 10_000
    said: dict[str, UnknownName] = field(default_factory=dict)
    overflow: int = 0  # events about names beyond max_names since the last summary
    summary_at: float | None = None
    pruned_at: float | None = None
    events: int = 0  # every event about an unknown cluster, said or not (the planner's metric)


class EngineState:
    """Everything the planner decides from. Persisted as a snapshot by the shell."""

    # What each field holds (its type, said once here; `__init__` gives its starting value).
    sequence: Sequence
    stages: list[StageRec]
    stage_by_name: dict[str, StageRec]
    clusters: dict[str, ClusterRec]
    # the shared profiles of the clusters (ClusterProfile), by what they hold: rebuilt on load
    profiles: dict[Hashable, ClusterProfile]
    _last_profile: ClusterProfile | None
    _last_versions: tuple[object, tuple[Version, Version]]
    # cluster groups of the inventory (Fleet's ClusterGroup): stages and partitions select by them
    groups: dict[str, ClusterGroup]
    # removed from the inventory while upgrading: kept until the result comes (SEQ-6a)
    departed: dict[str, ClusterRec]
    # clusters that left the inventory, as they were: one registered again is the same cluster,
    # never moved back by an older record nor upgraded twice by one rollout (BUS-3, VER-6)
    left: dict[str, ClusterRec]
    rollouts: dict[str, RolloutRec]
    seen_events: set[str]
    soak_overrides: dict[tuple[str, str], float | None]  # None: removed (OPS-2)
    unknown: UnknownClusters
    gates: dict[GateKey, GateRec]  # CHK-1: approval gates reached, by rollout, stage, position
    checks: dict[CheckKey, CheckRec]  # CHK-2: checks of a rollout at a stage, their series
    timers: list[Timer]
    # the pending cluster timers by (at, cluster, track), how many of each: asking whether one is
    # already due costs the same however many timers are pending (WIN-3, a held cluster)
    cluster_timers: dict[tuple[float, str, int], int]
    next_command: int
    dirty: set[int]
    out: list[Command]
    touched_rollouts: set[str]  # rollouts a run of which moved in this decision (STAT-4)
    now: float
    requested_wake: float | None
    # clusters the current dispatch pass found outside their window: (opens at, name), for WIN-4
    window_blocked: list[tuple[float, str]]
    # clusters the current dispatch pass found held by their disruption budget: (ends at, name), CHK-4
    budget_blocked: list[tuple[float, str]]

    def __init__(self, *, sequence: Sequence) -> None:
        self.sequence = sequence
        self.stages = [StageRec(index=i, spec=s) for i, s in enumerate(sequence.stages)]
        self.stage_by_name = {s.spec.name: s for s in self.stages}
        self.clusters = {}
        self.profiles = {}
        self._last_profile = None
        self._last_versions = ((), NO_VERSIONS)
        self.groups = {}
        self.departed = {}
        self.left = {}
        self.rollouts = {}
        self.seen_events = set()
        self.soak_overrides = {}
        self.unknown = UnknownClusters()
        self.gates = {}
        self.checks = {}
        self.timers = []
        self.cluster_timers = {}
        self.next_command = 0
        self.dirty = set()
        self.out = []
        self.touched_rollouts = set()
        self.now = 0.0
        self.requested_wake = None
        self.window_blocked = []
        self.budget_blocked = []

    def profile(self, spec: Cluster) -> ClusterProfile:
        last = self._last_profile
        if (
            last is not None
            and spec.labels == last.labels
            and spec.channel == last.channel
            and spec.group == last.group
            and spec.group_labels == last.group_labels
            and spec.maintenance_window is last.maintenance_window
            and spec.exclusions is last.exclusions
            and spec.deprecated_api_usage == last.deprecated_api_usage
        ):
            return last  # an inventory lists alike clusters together: no key to build
        key = profile_key(spec)
        found = self.profiles.get(key)
        if found is None:
            found = self.profiles[key] = ClusterProfile(spec)
        self._last_profile = found
        return found

    def record(self, spec: Cluster) -> ClusterRec:
        """A new cluster record from an inventory model; the model itself is not kept."""
        reported = (spec.version, spec.node_version, spec.node_pools)
        if reported != self._last_versions[0]:
            self._last_versions = (reported, pair(spec.control_plane, spec.nodes))
        record = ClusterRec(spec.name, self.profile(spec), self._last_versions[1])
        if spec.last_upgrade is not None:  # CHK-4
            record.upgraded_at = pair(*spec.last_upgrade.epochs())
        return record

    def add_run_timer(self, at: float, kind: str, *, stage: int, track: int, rollout_id: str) -> None:
        heapq.heappush(self.timers, Timer(at, (stage, track), kind, track, rollout_id, stage))

    def add_cluster_timer(self, at: float, *, name: str, track: int) -> None:
        # after every run timer of the same instant: windows open once stages have moved on
        heapq.heappush(self.timers, Timer(at, (len(self.stages), 0), "cluster", track, name))
        key = (at, name, track)
        self.cluster_timers[key] = self.cluster_timers.get(key, 0) + 1

    def has_cluster_timer(self, at: float, *, name: str, track: int) -> bool:
        return (at, name, track) in self.cluster_timers

    def pop_timer(self) -> Timer:
        """The earliest pending timer, taken off the heap (and off the keyed cluster timers)."""
        timer = heapq.heappop(self.timers)
        if timer.kind == "cluster":
            key = (timer.at, timer.ref, timer.track)
            left = self.cluster_timers[key] - 1
            if left:
                self.cluster_timers[key] = left
            else:
                del self.cluster_timers[key]
        return timer

    def clear_timers(self) -> None:
        self.timers = []
        self.cluster_timers = {}

    def emit(self, command: Command) -> None:
        self.out.append(command)
