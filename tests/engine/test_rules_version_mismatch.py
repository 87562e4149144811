"""An upgrade that "succeeded" on a cluster that reports another version is not done (GATE-1, GATE-2,
STAT-1 NOT_READY with VERSION_MISMATCH, BUS-7), through `decide`, with the audit after every decision.

The health monitor passes on the versions a cluster reports (its API server, its oldest kubelet);
the engine compares them with the version the track's succeeded upgrade went to.
"""

from __future__ import annotations

import io

from enginekit import CP, MIN, NODES, T0, V30, V31, Driver, advances, cluster, notices, sequence, stage, transitions
from rich.console import Console

from rollout_cli.dashboard import attention_text
from rollout_common.commands import Command, Notice
from rollout_common.events import Event, Readiness, UpgradeResult
from rollout_common.status import ClusterStatus, Track
from rollout_planner.engine import snapshot
from rollout_planner.engine.audit import audit
from rollout_planner.engine.views import track_status
from rollout_planner.service.status_document import status_document

OLD_NODES = "1.31.2"  # a plain version, as a kubeadm cluster's kubelets report it without their `v`


class Audited(Driver):
    def send(self, *events: Event, at: float | None = None) -> list[Command]:
        out = super().send(*events, at=at)
        assert audit(self.state) == []
        return out

    def succeed(self, name: str, track: Track, *, at: float) -> tuple[list[Command], float]:
        """The result of `name`'s upgrade on `track`, finished at the instant it is sent."""
        command_id, version = self.running.pop((name, track))
        finished = T0 + at
        event = UpgradeResult(
            command_id=command_id, cluster=name, track=track, version=version, outcome="succeeded", finished_at=finished
        )
        return self.send(event, at=at), finished

    def reports(self, name: str, *, at: float, cp: str | None = None, nodes: str | None = None) -> list[Command]:
        """A ready readiness observed at `at`, with the versions the cluster reports."""
        event = Readiness(cluster=name, ready=True, observed_at=T0 + at, control_plane_version=cp, node_version=nodes)
        return self.send(event, at=at)


def strict_stage() -> Audited:
    """One partition, one cluster a batch, nothing unavailable allowed: GATE-1 shows every hold."""
    return Audited(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0})),
        [cluster("a-1"), cluster("a-2")],
    )


def mismatch_notices(commands: list[Command]) -> list[tuple[str, str | None, str]]:
    found = [c for c in commands if isinstance(c, Notice) and c.code.startswith("VERSION")]
    assert all(c.stage == "a" for c in found)
    return [(c.code, c.cluster, c.message) for c in found]


def test_gate_1_an_upgrade_the_cluster_does_not_report_holds_the_next_batch_until_it_does() -> None:
    d = strict_stage()
    assert advances(d.start(V31, (CP,))) == [("a", "controlPlane", V31, ["a-1"])]
    d.succeed("a-1", CP, at=10 * MIN)
    out = d.reports("a-1", at=11 * MIN, cp=V30)  # ready, but still on the version it had
    assert mismatch_notices(out) == [
        (
            "VERSION_MISMATCH",
            "a-1",
            f"cluster a-1 controlPlane: VERSION_MISMATCH: upgraded to {V31} but reports {V30}; "
            f"not counted done until it reports {V31}",
        )
    ]
    assert advances(out) == []  # GATE-1: a-1 counts unavailable, maxUnavailable is 0
    record = d.state.clusters["a-1"]
    assert not record.available and not record.awaiting_ready  # ready after the upgrade: only the version holds it
    assert track_status(d.state, record, 0) == (
        ClusterStatus.NOT_READY,
        f"VERSION_MISMATCH: upgraded to {V31} but reports {V30}",
    )
    assert d.state.stages[0].partitions[0].unavailable == 1
    # the same report again is no news
    assert mismatch_notices(d.reports("a-1", at=12 * MIN, cp=V30)) == []
    out = d.reports("a-1", at=13 * MIN, cp=V31)
    assert mismatch_notices(out) == [
        ("VERSION_CONFIRMED", "a-1", f"cluster a-1 controlPlane reports {V31}, the version it was upgraded to")
    ]
    assert advances(out) == [("a", "controlPlane", V31, ["a-2"])]
    assert track_status(d.state, d.state.clusters["a-1"], 0) == (ClusterStatus.COMPLETE, None)


def test_gate_2_a_mismatched_cluster_is_not_done_so_its_strict_partition_does_not_soak() -> None:
    d = Audited(sequence(stage("a", soak="1d", rolloutStrategy={"maxUnavailable": 0})), [cluster("a-1")])
    d.start(V31, (CP,))
    d.succeed("a-1", CP, at=10 * MIN)
    out = d.reports("a-1", at=11 * MIN, cp=V30)
    assert transitions(out) == []
    assert d.state.stages[0].partitions[0].not_done[0] == 1
    out = d.reports("a-1", at=12 * MIN, cp=V31)
    assert transitions(out) == [("a", "controlPlane", "SOAKING", V31)]


def test_bus_7_a_report_observed_before_the_upgrade_finished_is_no_mismatch() -> None:
    d = strict_stage()
    d.start(V31, (CP,))
    _, finished = d.succeed("a-1", CP, at=10 * MIN)
    out = d.send(Readiness(cluster="a-1", ready=True, observed_at=finished - 1, control_plane_version=V30), at=10 * MIN)
    assert notices(out) == []
    assert d.state.clusters["a-1"].mismatch == (None, None)


def test_nodes_compare_the_lowest_kubelet_with_the_node_upgrade() -> None:
    d = Audited(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 1, "maxUnavailable": 0})),
        [cluster(n, version="1.31.5", nodeVersion=OLD_NODES) for n in ("a-1", "a-2")],
    )
    target = "1.31.5"
    d.start(target, (NODES,))
    d.succeed("a-1", NODES, at=10 * MIN)
    # the control plane was never upgraded by the rollout: its report is not checked
    out = d.reports("a-1", at=11 * MIN, cp="1.31.3", nodes=OLD_NODES)
    assert [(code, name) for code, name, _ in mismatch_notices(out)] == [("VERSION_MISMATCH", "a-1")]
    assert d.state.clusters["a-1"].mismatch == (None, d.state.clusters["a-1"].mismatch[1])
    assert str(d.state.clusters["a-1"].mismatch[1]) == OLD_NODES
    assert advances(out) == []
    out = d.reports("a-1", at=12 * MIN, cp="1.31.3", nodes=target)
    assert advances(out) == [("a", "nodes", target, ["a-2"])]


def test_a_track_no_rollout_upgraded_is_not_checked_against_the_inventory() -> None:
    d = strict_stage()
    out = d.reports("a-2", at=MIN, cp="1.30.9", nodes="1.30.1")
    assert notices(out) == []
    assert d.state.clusters["a-2"].available


def test_a_version_not_reported_changes_nothing() -> None:
    d = strict_stage()
    d.start(V31, (CP,))
    d.succeed("a-1", CP, at=10 * MIN)
    d.reports("a-1", at=11 * MIN, cp=V30)
    out = d.reports("a-1", at=12 * MIN)  # a probe that cannot read versions this time
    assert notices(out) == [] and advances(out) == []
    assert str(d.state.clusters["a-1"].mismatch[0]) == V30


def test_bus_6_the_mismatch_survives_a_snapshot_and_is_worded_in_rollout_status() -> None:
    d = strict_stage()
    d.start(V31, (CP,))
    d.succeed("a-1", CP, at=10 * MIN)
    d.reports("a-1", at=11 * MIN, cp=V30)
    restored = snapshot.load(snapshot.dump(d.state))
    record = restored.clusters["a-1"]
    assert (str(record.mismatch[0]), record.mismatch[1], record.available) == (V30, None, False)
    assert restored.stages[0].partitions[0].unavailable == 1
    attention = status_document(restored, batch=1)["attention"]
    assert (attention["versionMismatch"], attention["versionMismatchTotal"]) == (
        [{"cluster": "a-1", "track": "controlPlane", "expected": V31, "reported": V30}],
        1,
    )
    rendered = attention_text(status_document(restored, batch=1), clock=restored.now)
    assert rendered is not None
    console = Console(file=io.StringIO(), width=400)
    console.print(rendered)
    assert (
        f"NOT_READY cluster a-1 controlPlane: VERSION_MISMATCH: upgraded to {V31} but reports {V30}; "
        f"not counted done until it reports {V31}"
    ) in console.file.getvalue()  # type: ignore[attr-defined]
    # a snapshot without a mismatch carries no key for it, and one written before the key loads
    clean = strict_stage()
    assert b"mismatch" not in snapshot.dump(clean.state)
