"""The planner's compact state: clusters share profiles and per-track pairs instead of holding their
inventory models, alike clusters are retargeted once per kind, and format-4 snapshots keep it all."""

from __future__ import annotations

import pickle
from typing import Any

from enginekit import T0, V31, cluster, sequence, stage

from rollout_common.events import ReleaseTarget
from rollout_planner.engine import decide, lifecycle, new_state
from rollout_planner.engine.model import NO_FLAGS, NO_PAIR
from rollout_planner.engine.snapshot import FORMAT_VERSION, dump, load
from rollout_planner.engine.targets import retarget


def _fleet() -> list[object]:
    alike = [cluster(f"prod-{i:02d}", labels={"env": "prod"}) for i in range(12)]
    other = [cluster("prod-other", labels={"env": "prod", "tier": "gold"}, nodeVersion="1.30.4-gke.1000")]
    return [*alike, *other]


def _released() -> tuple[Any, list[Any]]:
    strategy = {"autoPartitionSize": "50%", "autoPartitionThreshold": 4, "maxUnavailable": 2, "maxNew": 2}
    state = new_state(sequence(stage("prod", soak="1d", rolloutStrategy=strategy)), _fleet())  # type: ignore[arg-type]
    _, out = decide(state, ReleaseTarget(event_id="r1", channel="regular", targets={"1.30": V31}), T0)
    return state, out


def test_alike_clusters_share_one_profile_and_one_version_pair() -> None:
    state, _ = _released()
    records = state.clusters
    assert len({id(r.profile) for r in records.values()}) == 2
    assert len({id(records[f"prod-{i:02d}"].versions) for i in range(12)}) == 1
    assert records["prod-other"].profile.labels == {"env": "prod", "tier": "gold"}
    assert not hasattr(records["prod-00"], "spec"), "no inventory model is kept per cluster"


def _view(state: Any) -> object:
    """Everything a retarget pass writes: per cluster, per partition, per run."""
    clusters = {
        n: (c.target, c.target_run, c.queued, c.not_done, c.available, c.retries, c.waiting_until)
        for n, c in state.clusters.items()
    }
    stage_rec = state.stages[0]
    partitions = [
        (p.unavailable, p.not_done, p.queued_unavailable, [{v: sorted(h) for v, h in q.items()} for q in p.pending])
        for p in stage_rec.partitions
    ]
    runs = [(r.remaining, r.overtaken, sorted(r.working)) for t in stage_rec.runs for r in t.values()]
    return clusters, partitions, runs, sorted(state.dirty)


def test_ver_6_a_release_targets_every_member_as_retargeting_each_alone_would(monkeypatch: Any) -> None:
    """The pass over alike clusters (one retarget per kind, copied) leaves what one retarget per
    cluster leaves: the same targets, queues, counts, runs and commands."""
    fast, fast_out = _released()
    monkeypatch.setattr(
        lifecycle,
        "retarget_members",
        lambda state, stage, names: [retarget(state, state.clusters[n]) for n in names],
    )
    slow, slow_out = _released()
    assert _view(fast) == _view(slow)
    assert fast_out == slow_out
    assert fast_out, "the release hands out batches"


def test_bus_6_a_copied_state_shares_the_pairs_again() -> None:
    """The planner's trial decisions copy the state with pickle: identity checks must still hold."""
    copy = pickle.loads(pickle.dumps(new_state(sequence(stage("prod")), _fleet())))  # type: ignore[arg-type]
    record = copy.clusters["prod-00"]
    assert record.failed is NO_PAIR and record.running is NO_PAIR and record.not_done is NO_FLAGS
    assert record.compute_available()


def test_bus_6_a_format_4_snapshot_loads_to_a_state_that_writes_the_same_bytes() -> None:
    state, _ = _released()
    data = dump(state)
    assert data.startswith(f"rollout-snapshot {FORMAT_VERSION}\n".encode())
    again = load(data)
    assert dump(again) == data
    assert again.clusters["prod-other"].versions[1].text == "1.30.4-gke.1000"
    assert dump(load(dump(pickle.loads(pickle.dumps(state))))) == data, "a copy writes the same bytes"
