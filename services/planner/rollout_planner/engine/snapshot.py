"""Persisting the engine state: facts only, derived counters and queues rebuilt on load.

Only what was observed or decided is stored (versions, running upgrades, runs, offers, timers);
partitions, per-partition counters, queues and run membership are recomputed by the same code the
planner runs, so a snapshot cannot disagree with itself.
"""

from __future__ import annotations

import json
from operator import attrgetter
from typing import Any

import msgspec

from rollout_common.check_results import CheckOutcome
from rollout_common.fleet import Cluster, ClusterGroup
from rollout_common.gates import GatePosition
from rollout_common.sequence import Sequence
from rollout_common.status import RolloutState, StageState
from rollout_common.version import Version, parse_minor, parse_version
from rollout_planner.engine.collections_paused import collections_paused
from rollout_planner.engine.inventory import rebuild_stage
from rollout_planner.engine.model import (
    NO_PAIR,
    CheckRec,
    ClusterProfile,
    ClusterRec,
    EngineState,
    GateRec,
    Offer,
    RolloutRec,
    Run,
    UnknownClusters,
    UnknownName,
    pair,
    profile_key,
    put,
)
from rollout_planner.engine.tally import recount_departed

# 2: timers name their stage, track and reference as fields
# 3: offers and GATE-1 first batches belong to runs; in-flight upgrades keep the stage and partition
#    that handed them out; clusters removed mid-upgrade; retries, observation times, run's prior state
# 4: MessagePack, and clusters as columns: shared profiles (labels, channel, groups, windows) and
#    distinct per-cluster states stored once each, every cluster an index into them (a million
#    clusters in tens of MB, written in about a second); formats 1-3 were JSON
FORMAT_VERSION = 4

# the facts stored per cluster, besides its name, profile and versions (ClusterRec slots)
_FACTS = (
    "ready",
    "running",
    "running_cmd",
    "awaiting_ready",
    "failed",
    "done_by",
    "waiting_until",
    "origin",
    "retries",
)
_facts_of = attrgetter(*_FACTS)
_versions_of = attrgetter("versions")
_profile_of = attrgetter("profile")
_observed_of = attrgetter("observed_at")
_finished_of = attrgetter("finished_at")
_name_of = attrgetter("name")


def _v(version: Version | None) -> str | None:
    return None if version is None else version.text


def _pv(text: str | None) -> Version | None:
    return None if text is None else parse_version(text)


# a first line any tool can read (`head -1`): the format, before the MessagePack document
MAGIC = b"rollout-snapshot "


def dump(state: EngineState) -> bytes:
    # the columns' temporary tuples are all freed by reference counting: no collection needed
    with collections_paused():
        return MAGIC + str(FORMAT_VERSION).encode() + b"\n" + msgspec.msgpack.encode(document(state))


def stored_format(data: bytes) -> object:
    """The format a stored snapshot names: its first line since format 4, its JSON field before."""
    if data.startswith(MAGIC):
        number = data[len(MAGIC) : data.find(b"\n")]
        return int(number) if number.isdigit() else number.decode(errors="replace")
    if data[:1] == b"{":
        return json.loads(data).get("format")
    return None


def document(state: EngineState) -> dict[str, Any]:
    """What a snapshot holds, before encoding (the benchmark compares encoders on it)."""
    profiles: dict[int, int] = {}
    by_content: dict[str, int] = {}
    table: list[dict[str, Any]] = []
    doc = {
        "format": FORMAT_VERSION,
        "sequence": state.sequence.model_dump(mode="json", by_alias=True),
        "now": state.now,
        "nextCommand": state.next_command,
        "requestedWake": state.requested_wake,
        "seen": sorted(state.seen_events),
        "soakOverrides": [[s, v, d] for (s, v), d in state.soak_overrides.items()],
        "gates": _gate_rows(state),
        "checks": _check_rows(state),
        "timers": [[t.at, t.kind, t.stage, t.track, t.ref] for t in state.timers],
        "unknown": _unknown(state.unknown),
        "rollouts": [_rollout(r) for r in state.rollouts.values()],
        "clusters": _clusters(list(state.clusters.values()), profiles, table, by_content),
        "groups": [g.model_dump(mode="json", by_alias=True) for g in state.groups.values()],
        "departed": _clusters(list(state.departed.values()), profiles, table, by_content),
        "left": _clusters(list(state.left.values()), profiles, table, by_content),
        "stages": [_stage(s) for s in state.stages],
        "profiles": table,
    }
    return doc


def _gate_rows(state: EngineState) -> list[list[Any]]:
    """CHK-1: the approval gates reached, one row each."""
    return [
        [r, s, p.value, g.reached_at, g.approved_at, g.approved_by, g.comment] for (r, s, p), g in state.gates.items()
    ]


def _check_rows(state: EngineState) -> list[list[Any]]:
    """CHK-2: the checks of each rollout at each stage, one row each."""
    return [
        [
            r,
            s,
            c,
            k.since,
            k.interval,
            k.observed_at,
            None if k.outcome is None else k.outcome.value,
            k.value,
            k.failed,
            k.inconclusive,
        ]
        for (r, s, c), k in state.checks.items()
    ]


def _unknown(unknown: UnknownClusters) -> dict[str, Any]:
    return {
        "said": [[name, said.at, said.held] for name, said in unknown.said.items()],
        "overflow": unknown.overflow,
        "summaryAt": unknown.summary_at,
        "prunedAt": unknown.pruned_at,
        "events": unknown.events,
    }


def _load_unknown(unknown: UnknownClusters, raw: dict[str, Any]) -> None:
    unknown.said = {name: UnknownName(at, held) for name, at, held in raw["said"]}
    unknown.overflow = raw["overflow"]
    unknown.summary_at = raw["summaryAt"]
    unknown.pruned_at = raw["prunedAt"]
    unknown.events = raw["events"]


def _rollout(r: RolloutRec) -> dict[str, Any]:
    return {
        "id": r.id,
        "eventId": r.event_id,
        "createdAt": r.created_at,
        "tracks": list(r.tracks),
        "byMinor": None if r.by_minor is None else {str(m): v.text for m, v in r.by_minor.items()},
        "version": _v(r.version),
        "state": r.state.value,
        "paused": r.paused,
        "reason": r.reason,
    }


def _clusters(
    records: list[ClusterRec],
    profiles: dict[int, int],
    table: list[dict[str, Any]],
    profiles_by_content: dict[str, int],
) -> dict[str, Any]:
    """Columns: names, then per cluster an index into the distinct profiles, version pairs and
    facts. The per-cluster passes run in C (attrgetter, map, dict): the columns of a million
    clusters take about a second where a JSON object per cluster took about a minute."""
    _table_profiles(records, profiles, table, profiles_by_content)
    version_pairs, versions = _version_columns(records)
    facts = list(map(_facts_of, records))  # hashed by value: pairs of None, str, int, frozenset
    fact_index = {key: i for i, key in enumerate(dict.fromkeys(facts))}
    return {
        "names": list(map(_name_of, records)),
        "profile": list(map(profiles.__getitem__, map(id, map(_profile_of, records)))),
        "versionPairs": version_pairs,
        "versions": versions,
        "factRows": [_facts(row) for row in fact_index],
        "facts": list(map(fact_index.__getitem__, facts)),
        "observedAt": list(map(_observed_of, records)),
        "finishedAt": list(map(_finished_of, records)),
        **_sparse_columns(records),
    }


def _sparse_columns(records: list[ClusterRec]) -> dict[str, Any]:
    """What only some clusters have, by index (what `_load_kept` reads)."""
    kept = [(i, _kept_targets(c)) for i, c in enumerate(records) if c.running is not NO_PAIR or c.failed is not NO_PAIR]
    mismatched = [[i, [_v(v) for v in c.mismatch]] for i, c in enumerate(records) if c.mismatch is not NO_PAIR]
    upgraded = [[i, list(c.upgraded_at)] for i, c in enumerate(records) if c.upgraded_at is not NO_PAIR]
    floors = [[i, [_v(v) for v in c.floor]] for i, c in enumerate(records) if c.floor is not NO_PAIR]
    return {
        # a running or failed upgrade's target is a decision already made: kept, not recomputed
        "keptTargets": [[i, targets] for i, targets in kept if targets != [None, None]],
        # VERSION_MISMATCH: only the clusters that disagree, by index, and only when one does
        **({"mismatch": mismatched} if mismatched else {}),
        # CHK-4: when each track's last upgrade finished, for the clusters where one is known
        **({"upgradedAt": upgraded} if upgraded else {}),
        # the versions an inventory lowering left as floors (START-3), only where there is one
        **({"floors": floors} if floors else {}),
    }


def _version_columns(records: list[ClusterRec]) -> tuple[list[list[str]], list[int]]:
    """The distinct version pairs, and per cluster the index of its pair."""
    # version pairs are shared objects (model.pair): their identities stand for their values (a
    # Version hashes in Python); every pass below runs in C (map, zip, dict)
    pairs = list(map(id, map(_versions_of, records)))
    pair_of = dict(zip(pairs, map(_versions_of, records), strict=True))
    # equal pairs that are distinct objects (a copied state) are one entry: hashed by value once each
    distinct: dict[tuple[Version, Version], int] = {}
    pair_index = {key: distinct.setdefault(versions, len(distinct)) for key, versions in pair_of.items()}
    return [[v.text for v in versions] for versions in distinct], list(map(pair_index.__getitem__, pairs))


def _table_profiles(
    records: list[ClusterRec],
    profiles: dict[int, int],
    table: list[dict[str, Any]],
    profiles_by_content: dict[str, int],
) -> None:
    """Each distinct profile of `records` into the table once; `profiles`: its index by identity."""
    for profile in dict.fromkeys(map(_profile_of, records)):
        if id(profile) not in profiles:
            # by content: equal profiles that are distinct objects are one entry (the same bytes
            # whichever way the state was reached)
            raw = _profile(profile)
            key = json.dumps(raw, sort_keys=True)
            if key not in profiles_by_content:
                profiles_by_content[key] = len(table)
                table.append(raw)
            profiles[id(profile)] = profiles_by_content[key]


def _profile(p: ClusterProfile) -> dict[str, Any]:
    return {
        "labels": dict(p.labels),
        "channel": p.channel,
        "group": p.group,
        "groupLabels": dict(p.group_labels),
        "maintenanceWindow": None
        if p.maintenance_window is None
        else p.maintenance_window.model_dump(mode="json", by_alias=True, exclude_none=True),
        "exclusions": [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in p.exclusions],
        "deprecatedApiUsage": p.deprecated_api_usage,
    }


def _facts(row: tuple[Any, ...]) -> list[Any]:
    ready, running, running_cmd, awaiting, failed, done_by, waiting, origin, retries = row
    return [
        ready,
        [_v(v) for v in running],
        list(running_cmd),
        awaiting,
        list(failed),
        [sorted(s) for s in done_by],
        list(waiting),
        [None if o is None else list(o) for o in origin],
        list(retries),
    ]


def _kept(c: ClusterRec, track: int) -> bool:
    return c.running[track] is not None or (c.failed[track] is not None and c.target[track] is not None)


def _kept_targets(c: ClusterRec) -> list[Any]:
    return [[_v(c.target[t]), c.target_run[t]] if _kept(c, t) else None for t in (0, 1)]


def _stage(s: Any) -> dict[str, Any]:
    return {
        "names": s.members + s.no_partition,
        "runs": [[_run(r) for r in track.values()] for track in s.runs],
        "forcedRun": s.forced_run,
        "handed": [[name, track, position] for (name, track), position in s.handed.items()],
    }


def _offer(o: Offer) -> dict[str, Any]:
    return {
        "rollout": o.rollout_id,
        "version": _v(o.version),
        "onDemand": o.on_demand,
        "byMinor": None if o.by_minor is None else {str(m): v.text for m, v in o.by_minor.items()},
    }


def _run(r: Run) -> dict[str, Any]:
    return {
        "rollout": r.rollout_id,
        "stage": r.stage,
        "track": r.track,
        "state": r.state.value,
        "reason": r.reason,
        "openedAt": r.opened_at,
        "startedAt": r.started_at,
        "finishedAt": r.finished_at,
        "soakStarted": r.soak_started,
        "soakEnd": r.soak_end,
        "forced": r.forced,
        "working": sorted(v.text for v in r.working),
        "upgraded": sorted(v.text for v in r.upgraded),
        "overtaken": r.overtaken,
        "failures": r.failures,
        "qualified": _v(r.qualified),
        "offered": _v(r.offered),
        "awaitingCp": r.awaiting_cp,
        "offer": None if r.offer is None else _offer(r.offer),
        "heldOffer": None if r.held_offer is None else _offer(r.held_offer),
        "firstBatches": sorted(r.first_batches),
        "prior": None if r.prior is None else r.prior.value,
    }


def load(data: bytes) -> EngineState:
    with collections_paused():
        return _load(data)


def _load(data: bytes) -> EngineState:
    doc = _decoded(data)
    state = EngineState(sequence=Sequence.model_validate(doc["sequence"]))
    _load_clock_and_gates(state, doc)
    _load_timers(state, doc["timers"])
    if "unknown" in doc:  # absent from a snapshot written before: nothing said yet
        _load_unknown(state.unknown, doc["unknown"])
    for raw in doc["rollouts"]:
        state.rollouts[raw["id"]] = _load_rollout(raw)
    _load_fleet(state, doc)
    for stage, raw in zip(state.stages, doc["stages"], strict=True):
        _load_stage(state, stage, raw)
    for stage in state.stages:
        recount_departed(state, stage)  # once every cluster is placed again
    _count_remaining(state)
    state.out = []
    # a restarted planner looks at every stage once: dispatching an unchanged stage changes nothing
    # (the live planner looks again when time alone changes a stage: a queued cluster's window
    # closing wakes it, WIN-3)
    state.dirty = set(range(len(state.stages)))
    return state


def _load_clock_and_gates(state: EngineState, doc: dict[str, Any]) -> None:
    """The decision clock and the events seen; soak overrides (OPS-2), approval gates (CHK-1), check series (CHK-2)."""
    state.now = doc["now"]
    state.next_command = doc["nextCommand"]
    state.requested_wake = doc["requestedWake"]
    state.seen_events = set(doc["seen"])
    state.soak_overrides = {(s, v): d for s, v, d in doc["soakOverrides"]}
    # CHK-1: absent from a snapshot written before gates existed
    state.gates = {
        (r, s, GatePosition(p)): GateRec(at, ok, by, said) for r, s, p, at, ok, by, said in doc.get("gates", [])
    }
    # CHK-2: absent from a snapshot written before checks were applied
    state.checks = {
        (r, s, c): CheckRec(
            since, interval, seen, None if outcome is None else CheckOutcome(outcome), value, failed, unsure
        )
        for r, s, c, since, interval, seen, outcome, value, failed, unsure in doc.get("checks", [])
    }


def _decoded(data: bytes) -> dict[str, Any]:
    found = stored_format(data)  # formats 1-3 were JSON: refused with the format they name
    if found != FORMAT_VERSION:
        raise ValueError(f"snapshot format {found!r} is not {FORMAT_VERSION}")
    try:
        doc: dict[str, Any] = msgspec.msgpack.decode(data[data.find(b"\n") + 1 :])
    except msgspec.DecodeError as exc:
        raise ValueError(f"the snapshot is not format {FORMAT_VERSION} (MessagePack): {exc}") from exc
    return doc


def _load_fleet(state: EngineState, doc: dict[str, Any]) -> None:
    """The clusters (members, departed mid-upgrade, left) with their shared profiles, and the groups."""
    profiles = [_load_profile(state, raw) for raw in doc["profiles"]]
    state.clusters = _load_clusters(doc["clusters"], profiles)
    state.groups = {g.name: g for g in (ClusterGroup.model_validate(raw) for raw in doc["groups"])}
    state.departed = _load_clusters(doc["departed"], profiles)
    state.left = _load_clusters(doc["left"], profiles)


def _load_timers(state: EngineState, timers: list[list[Any]]) -> None:
    state.clear_timers()
    for at, kind, stage, track, ref in timers:
        if kind == "cluster":
            state.add_cluster_timer(at, name=ref, track=track)
        else:
            state.add_run_timer(at, kind, stage=stage, track=track, rollout_id=ref)


def _count_remaining(state: EngineState) -> None:
    """An upgrade in flight counts for the run that handed it out, wherever the cluster is now; a
    failed one for its stage's run (retargeting passed over both)."""
    for cluster in [*state.clusters.values(), *state.departed.values()]:
        for track, origin in enumerate(cluster.origin):
            if cluster.running[track] is not None and origin is not None:
                where: int | None = origin[0]
            elif cluster.failed[track] is not None and cluster.partition is not None:
                where = cluster.stage
            else:
                continue
            if where is not None:
                run = state.stages[where].runs[track].get(cluster.target_run[track] or "")
                if run is not None:
                    run.remaining += 1


def _load_rollout(raw: dict[str, Any]) -> RolloutRec:
    by_minor = raw["byMinor"]
    return RolloutRec(
        id=raw["id"],
        event_id=raw["eventId"],
        created_at=raw["createdAt"],
        by_minor=None if by_minor is None else {parse_minor(m): parse_version(v) for m, v in by_minor.items()},
        version=_pv(raw["version"]),
        tracks=tuple(raw["tracks"]),
        state=RolloutState(raw["state"]),
        paused=raw["paused"],
        reason=raw["reason"],
    )


def _pair(raw: list[Any]) -> Any:
    return pair(raw[0], raw[1])


def _load_profile(state: EngineState, raw: dict[str, Any]) -> ClusterProfile:
    # validated as an inventory record of its own, so a profile is what an upsert would have made
    spec = Cluster.model_validate(
        {
            "name": "profile",
            "version": "0.0.0",
            "labels": raw["labels"],
            "channel": raw["channel"],
            "group": raw["group"],
            "groupLabels": raw["groupLabels"],
            "maintenanceWindow": raw["maintenanceWindow"],
            "exclusions": raw["exclusions"],
            "deprecatedApiUsage": raw["deprecatedApiUsage"],
        }
    )
    key = profile_key(spec)
    if key == ("unshared", spec.name):  # a window that cannot be hashed: never merged with another
        return ClusterProfile(spec)
    return state.profiles.setdefault(key, ClusterProfile(spec))


def _load_facts(record: ClusterRec, raw: list[Any]) -> None:
    ready, running, running_cmd, awaiting, failed, done_by, waiting, origin, retries = raw
    record.ready = ready
    record.running = pair(_pv(running[0]), _pv(running[1]))
    record.running_cmd = _pair(running_cmd)
    record.awaiting_ready = awaiting
    record.failed = _pair(failed)
    record.done_by = pair(frozenset(done_by[0]), frozenset(done_by[1]))
    record.waiting_until = _pair(waiting)
    record.origin = pair(*(None if o is None else (o[0], o[1]) for o in origin))
    record.retries = _pair(retries)


def _load_clusters(raw: dict[str, Any], profiles: list[ClusterProfile]) -> dict[str, ClusterRec]:
    pairs = [pair(parse_version(cp), parse_version(nodes)) for cp, nodes in raw["versionPairs"]]
    # each distinct fact row decoded once, then copied onto every cluster that has it
    template = ClusterRec("", profiles[0], pairs[0]) if profiles and pairs else None
    rows: list[tuple[Any, ...]] = []
    for facts in raw["factRows"]:
        assert template is not None
        _load_facts(template, facts)
        rows.append(_facts_of(template))
    out: dict[str, ClusterRec] = {}
    columns = zip(
        raw["names"], raw["profile"], raw["versions"], raw["facts"], raw["observedAt"], raw["finishedAt"], strict=True
    )
    for name, profile, versions, facts, observed, finished in columns:
        record = ClusterRec(name, profiles[profile], pairs[versions])
        record.observed_at, record.finished_at = observed, finished
        (
            record.ready,
            record.running,
            record.running_cmd,
            record.awaiting_ready,
            record.failed,
            record.done_by,
            record.waiting_until,
            record.origin,
            record.retries,
        ) = rows[facts]
        out[name] = record
    _load_kept(list(out.values()), raw)
    return out


def _load_kept(records: list[ClusterRec], raw: dict[str, Any]) -> None:
    """By index: the targets of upgrades running or failed, the versions of clusters that disagree, and
    when each track was last upgraded."""
    for index, kept in raw["keptTargets"]:
        record = records[index]
        for track, target in enumerate(kept):
            if target is not None:
                record.target = put(record.target, track, _pv(target[0]))
                record.target_run = put(record.target_run, track, target[1])
    for index, reported in raw.get("mismatch", []):
        records[index].mismatch = pair(_pv(reported[0]), _pv(reported[1]))
    for index, at in raw.get("upgradedAt", []):
        records[index].upgraded_at = pair(at[0], at[1])
    for index, floor in raw.get("floors", []):
        records[index].floor = pair(_pv(floor[0]), _pv(floor[1]))


def _load_stage(state: EngineState, stage: Any, raw: dict[str, Any]) -> None:
    for track, runs in enumerate(raw["runs"]):
        stage.runs[track] = {r["rollout"]: _load_run(r) for r in runs}
    stage.forced_run = raw["forcedRun"]
    stage.handed = {(name, track): position for name, track, position in raw["handed"]}
    rebuild_stage(state, stage, list(raw["names"]))
    # recounting the targets sets a run's overtaken anew; how its last cluster left is a fact (SOAK-4c)
    for track, runs in enumerate(raw["runs"]):
        for r in runs:
            stage.runs[track][r["rollout"]].overtaken = r.get("overtaken", False)


def _load_offer(raw: dict[str, Any]) -> Offer:
    by_minor = raw["byMinor"]
    return Offer(
        raw["rollout"],
        version=_pv(raw["version"]),
        on_demand=raw["onDemand"],
        by_minor=None if by_minor is None else {parse_minor(m): parse_version(v) for m, v in by_minor.items()},
    )


def _load_run(raw: dict[str, Any]) -> Run:
    run = Run(
        raw["rollout"],
        raw["stage"],
        raw["track"],
        StageState(raw["state"]),
        raw["reason"],
        opened_at=raw["openedAt"],
        started_at=raw["startedAt"],
        finished_at=raw["finishedAt"],
        soak_started=raw["soakStarted"],
        soak_end=raw["soakEnd"],
        forced=raw["forced"],
        overtaken=raw.get("overtaken", False),
        failures=raw["failures"],
        qualified=_pv(raw["qualified"]),
        offered=_pv(raw["offered"]),
        awaiting_cp=raw["awaitingCp"],
    )
    run.offer = None if raw["offer"] is None else _load_offer(raw["offer"])
    held = raw.get("heldOffer")
    run.held_offer = None if held is None else _load_offer(held)
    run.first_batches = set(raw["firstBatches"])
    run.prior = None if raw["prior"] is None else StageState(raw["prior"])
    run.working = {parse_version(v) for v in raw["working"]}
    run.upgraded = {parse_version(v) for v in raw["upgraded"]}
    return run
