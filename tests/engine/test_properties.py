"""Property tests: random fleets, strategies, health scripts and failures through the simulator.

The report is checked with the shared conformance checker (loaded read-only from its path), which
re-derives maxNew, GATE-1, GATE-3, no double upgrade, no downgrade, nodes never above the control plane,
at most one minor per control-plane upgrade and the health model from the report alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_checker import CHECK_PY, load_checker

from rollout_common.commands import Command
from rollout_common.events import Event
from rollout_common.status import TRACKS
from rollout_planner.engine import EngineState
from rollout_planner.engine.audit import audit
from rollout_planner.engine.model import TRACK_INDEXES
from rollout_planner.engine.views import stage_view, track_status
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

UNTIL_DAYS = 100
SETTLED = {"COMPLETE", "STUCK", "CANCELLED", "PENDING", "PAUSED"}

checker = load_checker() if CHECK_PY.exists() else None

quantity = st.one_of(st.integers(0, 12), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@st.composite
def cluster_specs(draw: st.DrawFn, count: int, stages: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        minor = draw(st.integers(29, 33))
        patch = draw(st.integers(1, 9))
        version = f"1.{minor}.{patch}-gke.{draw(st.integers(1, 3)) * 100}"
        spec: dict[str, Any] = {
            "name": f"c-{i:03d}",
            "labels": {"env": f"s{draw(st.integers(0, stages - 1))}", "p": str(draw(st.integers(0, 2)))},
            "version": version,
        }
        if minor > 29 and draw(st.booleans()):
            spec["nodeVersion"] = f"1.{minor - 1}.{patch}-gke.100"
        out.append(spec)
    return out


@st.composite
def strategies(draw: st.DrawFn) -> dict[str, Any]:
    s: dict[str, Any] = {
        "maxNew": draw(st.integers(1, 60)),
        "maxUnavailable": draw(quantity),
        "maxUnavailablePartitions": draw(st.one_of(st.integers(0, 2), st.just("50%"))),
        "autoPartitionThreshold": draw(st.sampled_from([0, 5, 20, 200])),
        "autoPartitionSize": draw(st.sampled_from([1, 5, 17, "10%", "25%", "50%"])),
    }
    if draw(st.integers(0, 3)) == 0:
        parts = [
            {"name": "p0", "clusterSelector": {"matchLabels": {"p": "0"}}},
            {
                "name": "p1",
                "clusterSelector": {"matchExpressions": [{"key": "p", "operator": "In", "values": ["1", "2"]}]},
            },
        ]
        if draw(st.booleans()):
            parts[1] = {"name": "p1", "maxUnavailable": draw(quantity), "clusterSelector": {"matchLabels": {"p": "1"}}}
        s["partitions"] = parts
    return s


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    stages = draw(st.integers(1, 3))
    count = draw(st.integers(1, 120))
    clusters = draw(cluster_specs(count, stages))
    names = [c["name"] for c in clusters]
    targets = {
        f"1.{m}": f"1.{m + 1}.{draw(st.integers(1, 20))}-gke.{draw(st.integers(1, 9)) * 1000}"
        for m in draw(st.sets(st.integers(29, 32), min_size=1, max_size=4))
    }
    not_ready = []
    for name in draw(st.lists(st.sampled_from(names), max_size=6, unique=True)):
        start = draw(st.integers(0, 120))
        not_ready.append({"cluster": name, "from": f"{start}m", "until": f"{start + draw(st.integers(1, 600))}m"})
    failures = [
        {"cluster": n, "track": draw(st.sampled_from(["controlPlane", "nodes"]))}
        for n in draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
    ]
    return {
        "name": "property",
        "clusters": clusters,
        "sequence": {
            "name": "main",
            "channel": "regular",
            "stages": [
                {
                    "name": f"s{i}",
                    "clusterSelector": {"matchLabels": {"env": f"s{i}"}},
                    "soak": draw(st.sampled_from(["0d", "1d", "2d"])),
                    "rolloutStrategy": draw(strategies()),
                }
                for i in range(stages)
            ],
        },
        "simulation": {
            "upgradeDuration": {"controlPlane": "10m", "nodes": "30m"},
            "readyAfter": "1m",
            "notReady": not_ready,
            "failures": failures,
        },
        "events": [{"at": "0s", "releaseTarget": {"channel": "regular", "targets": targets}}],
        "until": f"{UNTIL_DAYS}d",
    }


class _AuditingSimulator(Simulator):
    """Also proves after every decision that the engine's incremental counters equal a recount."""

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        commands = super()._decide(events, t)
        assert audit(self.state) == [], t
        _counts_are_each_clusters_status(self.state)
        return commands


def _counts_are_each_clusters_status(state: EngineState) -> None:
    """STAT-1, STAT-2: a stage's counts per status, which work out GATE-3's reach once per walk, are
    what each of its clusters' own status says."""
    for stage in state.stages:
        view = stage_view(state, stage, with_clusters=False)
        names = stage.members + stage.no_partition
        for track in TRACK_INDEXES:
            expected = Counter(track_status(state, state.clusters[name], track)[0].value for name in names)
            assert view["tracks"][TRACKS[track].value]["counts"] == dict(expected), (stage.spec.name, track)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=scenarios())
def test_random_fleets_keep_every_invariant(raw: dict[str, Any]) -> None:
    assert checker is not None, "the shared conformance checker must sit next to the repository (../shared)"
    scenario = Scenario.model_validate(raw)
    sim = _AuditingSimulator(scenario)
    report = sim.run()
    rep = report.as_json()
    assert checker is not None
    case = checker.Case(Path("property.yaml"), raw, rep)
    case.run()
    assert case.errors == []

    # every run terminates: nothing left in the queue before `until`, no track still moving
    assert not sim.queue or sim.queue[0][0] > scenario.until
    for stage, tracks in rep["final"]["stages"].items():
        for track, state in tracks.items():
            assert state in SETTLED, (stage, track, state)

    # no batch above maxNew; one version per batch; a cluster never in two batches of one instant and track
    max_new = {s["name"]: s["rolloutStrategy"]["maxNew"] for s in raw["sequence"]["stages"]}
    seen: set[tuple[float, str, str]] = set()
    for batch in rep["batches"]:
        assert 1 <= len(batch["clusters"]) <= max_new[batch["stage"]]
        for name in batch["clusters"]:
            key = (batch["t"], batch["track"], name)
            assert key not in seen
            seen.add(key)

    # no cluster upgraded twice to one version on one track; no downgrade; nodes never above control plane
    from rollout_common.version import parse_version

    cp = {c["name"]: parse_version(c["version"]) for c in raw["clusters"]}
    done: set[tuple[str, str, str]] = set()
    for event in rep["clusterEvents"]:
        if event["event"] == "started":
            key = (event["cluster"], event["track"], event["version"])
            assert key not in done
            version = parse_version(event["version"])
            if event["track"] == "nodes":
                assert version <= cp[event["cluster"]]
            else:
                assert version > cp[event["cluster"]]
                assert version.minor <= cp[event["cluster"]].minor.next()
        elif event["event"] == "succeeded":
            done.add((event["cluster"], event["track"], event["version"]))
            if event["track"] == "controlPlane":
                cp[event["cluster"]] = parse_version(event["version"])
