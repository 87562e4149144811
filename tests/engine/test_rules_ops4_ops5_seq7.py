"""OPS-4 retry, OPS-5 explicit targets, SEQ-7 sequence changes, STAT-4 rollout ends, SOAK-4c offers
withdrawn, BUS-7 observation times: through `decide`, with the audit after every decision."""

from __future__ import annotations

from typing import Any

from enginekit import (
    CP,
    MIN,
    NODES,
    V31,
    V32,
    Driver,
    acks,
    advances,
    cluster,
    sequence,
    stage,
    transitions,
)

from rollout_common.commands import Command, RolloutTransition, StageAdvance
from rollout_common.events import Event, OperatorCommand, Readiness, ReleaseTarget, SequenceChange, UpgradeResult
from rollout_planner.engine.audit import audit

REL = {"1.30": V31}


class Audited(Driver):
    def send(self, *events: Event, at: float | None = None) -> list[Command]:
        out = super().send(*events, at=at)
        assert audit(self.state) == []
        return out


def failing(**strategy: Any) -> Audited:
    return Audited(
        sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 1, **strategy}), stage("b")),
        [cluster("a-1"), cluster("a-2"), cluster("b-1")],
    )


def rollout_states(commands: list[Command]) -> list[tuple[str, str, str]]:
    return [(c.rollout_id, c.state.value, c.reason) for c in commands if isinstance(c, RolloutTransition)]


# OPS-5


def test_ops_5_a_command_without_a_rollout_or_all_is_rejected() -> None:
    d = failing()
    d.release(REL)
    out = d.send(OperatorCommand(command_id="c1", action="pause"), at=MIN)
    assert acks(out) == [
        ("c1", False, "name a rollout (rolloutId) or say it applies to all active rollouts (all: true) (OPS-5)")
    ]
    assert not d.state.rollouts["main-1"].paused


def test_ops_5_unknown_rollout_stage_or_cluster_is_rejected_with_the_reason() -> None:
    d = failing()
    d.release(REL)
    out = d.command("pause", at=MIN, command_id="c1", rollout_id="main-9")
    out += d.command("retry", at=MIN, command_id="c2", stage="nowhere")
    out += d.command("retry", at=MIN, command_id="c3", cluster="ghost")
    out += d.command("pause", at=MIN, command_id="c4", rollout_id="main-1")
    assert acks(out) == [
        ("c1", False, "unknown rollout main-9"),
        ("c2", False, "unknown stage 'nowhere'"),
        ("c3", False, "unknown cluster 'ghost'"),
        ("c4", True, "pause applied"),
    ]


# OPS-4


def test_ops_4_retry_sends_the_failed_cluster_again_with_its_retry_count() -> None:
    d = failing()
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN, outcome="failed")
    out = d.command("retry", at=20 * MIN, command_id="r1", cluster="a-1")
    assert acks(out) == [("r1", True, "retry applied")]
    batches = [c for c in d.history if isinstance(c, StageAdvance) and "a-1" in c.clusters]
    assert [(b.version, b.retries) for b in batches] == [(V31, {}), (V31, {"a-1": 1})]
    d.finish(["a-1"], CP, at=30 * MIN)
    assert d.state.clusters["a-1"].versions[0].text == V31


def test_ops_4_retry_with_nothing_failed_is_rejected() -> None:
    d = failing()
    d.release(REL)
    out = d.command("retry", at=MIN, command_id="r1", stage="a")
    assert acks(out) == [("r1", False, "no failed upgrade to retry in stage a")]


def test_ops_4_retry_resets_the_failure_budget_and_resumes_the_stage() -> None:
    d = failing(maxFailures=1, maxUnavailable="100%")
    d.release(REL)
    out = d.finish(["a-1"], CP, at=10 * MIN, outcome="failed")
    assert ("a", "controlPlane", "PAUSED", V31) in transitions(out)
    out = d.command("retry", at=20 * MIN, command_id="r1")
    assert ("a", "controlPlane", "IN_PROGRESS", V31) in transitions(out)
    assert advances(out, CP) == [("a", "controlPlane", V31, ["a-1"])]
    assert d.state.stages[0].runs[0]["main-1"].failures == 0


# SEQ-7


def test_seq_7_a_changed_strategy_applies_from_the_next_batch() -> None:
    d = failing(maxUnavailable="100%")
    d.release(REL)
    new = sequence(stage("a", soak="1d", rolloutStrategy={"maxNew": 5}), stage("b"), stage("c"))
    d.finish(["a-1"], CP, at=10 * MIN)
    out = d.send(SequenceChange(command_id="s1", sequence=new), at=11 * MIN)
    assert acks(out) == [("s1", True, "sequence change applied")]
    assert [s.spec.name for s in d.state.stages] == ["a", "b", "c"]
    assert d.state.stages[0].spec.rollout_strategy.max_new == 5


def test_seq_7_removing_or_reordering_a_stage_with_an_active_run_is_refused() -> None:
    d = failing()
    d.release(REL)
    out = d.send(SequenceChange(command_id="s1", sequence=sequence(stage("b"))), at=MIN)
    out += d.send(SequenceChange(command_id="s2", sequence=sequence(stage("b"), stage("a"))), at=MIN)
    out += d.send(SequenceChange(command_id="s3", sequence=sequence(stage("z"), stage("a"), stage("b"))), at=MIN)
    assert acks(out) == [
        ("s1", False, "stage a has an active run; it cannot be removed"),
        ("s2", False, "stage a has an active run; it cannot be reordered"),
        ("s3", False, "stage a has an active run; a new stage z cannot be put before it"),
    ]
    assert [s.spec.name for s in d.state.stages] == ["a", "b"]


def test_seq_7_membership_is_re_evaluated_and_an_upgrade_in_flight_goes_on() -> None:
    d = failing(maxUnavailable="100%")
    d.release(REL)
    moved = sequence(stage("a", clusterNames=["a-1"], soak="1d"), stage("b", clusterNames=["a-2", "b-1"]))
    d.send(SequenceChange(command_id="s1", sequence=moved), at=MIN)
    assert d.state.clusters["a-2"].stage == 1
    out = d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    assert d.state.clusters["a-1"].versions[0].text == V31
    assert advances(out, NODES) == [("a", "nodes", V31, ["a-1"])]


# STAT-4


def test_stat_4_a_release_with_nothing_to_do_stays_active_with_its_first_stage_stuck() -> None:
    """SOAK-4b, OPS-1: a STUCK first stage is evaluated again when the inventory changes, so its
    rollout is still active (it can be paused, resumed and cancelled), not COMPLETED."""
    d = failing()
    out = d.release({"1.28": "1.29.1-gke.100"})
    assert rollout_states(out) == [("main-1", "RUNNING", "started by event rel-1")]
    assert [(s, t, state) for s, t, state, _ in transitions(out)] == [
        ("a", "controlPlane", "STUCK"),
        ("a", "nodes", "STUCK"),
    ]
    assert d.state.rollouts["main-1"].state.value == "RUNNING"


def test_stat_4_a_rollout_ends_when_its_last_run_ends() -> None:
    d = Audited(sequence(stage("a", soak="0d")), [cluster("a-1")])
    newer = "1.31.14-gke.100"
    out = d.send(
        ReleaseTarget(event_id="r1", channel="regular", targets={"1.30": V31}),
        ReleaseTarget(event_id="r2", channel="regular", targets={"1.30": newer}),
    )
    assert ("main-1", "COMPLETED", "every run ended (a CANCELLED)") in rollout_states(out)
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    out = d.finish(["a-1"], NODES, at=40 * MIN, ready=True)
    assert rollout_states(out) == [("main-2", "COMPLETED", "every stage completed")]


# SOAK-4c


def test_soak_4c_an_overtaken_rollout_withdraws_its_offers() -> None:
    d = Audited(sequence(stage("a", soak="1d")), [cluster("a-1")])
    newer = "1.31.14-gke.100"
    out = d.send(
        ReleaseTarget(event_id="r1", channel="regular", targets={"1.30": V31, "1.31": V32}),
        ReleaseTarget(event_id="r2", channel="regular", targets={"1.30": newer}),
    )
    assert ("a", "controlPlane", "CANCELLED", V31) in transitions(out)
    assert advances(out) == [("a", "controlPlane", newer, ["a-1"])]
    out = d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    # the cancelled rollout's 1.32 is no longer offered: the nodes follow the newer rollout
    assert advances(out) == [("a", "nodes", newer, ["a-1"])]
    assert d.state.clusters["a-1"].target_run == (None, "main-2")


# BUS-7


def test_bus_7_an_older_readiness_observation_is_ignored() -> None:
    d = failing()
    d.ready(["a-2"], at=MIN, ready=False)
    d.send(Readiness(cluster="a-2", ready=True, observed_at=2000.0), at=2 * MIN)
    d.send(Readiness(cluster="a-2", ready=False, observed_at=1000.0), at=3 * MIN)
    assert d.state.clusters["a-2"].ready


def test_bus_7_ready_counts_only_when_observed_after_the_upgrade_finished() -> None:
    d = failing(maxUnavailable=0)
    d.start(V31, (CP,))  # control planes only, so nothing else starts on a-1 after its upgrade
    command_id, version = d.running.pop(("a-1", CP))
    finished = d.now + 10 * MIN
    d.send(
        UpgradeResult(
            command_id=command_id, cluster="a-1", track=CP, version=version, outcome="succeeded", finished_at=finished
        ),
        at=10 * MIN,
    )
    d.send(Readiness(cluster="a-1", ready=True, observed_at=finished - 1), at=10 * MIN)
    assert d.state.clusters["a-1"].awaiting_ready
    d.send(Readiness(cluster="a-1", ready=True, observed_at=finished + 1), at=11 * MIN)
    assert not d.state.clusters["a-1"].awaiting_ready


def test_bus_7_untimed_readiness_keeps_todays_behaviour() -> None:
    d = failing()
    d.release(REL)
    d.finish(["a-1"], CP, at=10 * MIN, ready=True)
    assert not d.state.clusters["a-1"].awaiting_ready


def test_ops_4_a_failed_upgrade_waits_for_a_retry_until_its_run_is_withdrawn() -> None:
    """A failure holds its target until a retry; a withdrawn run (OPS-1 cancel) frees the cluster, and
    a newer rollout then takes it (a newer rollout's own offer takes it over at once: SOAK-4c)."""
    d = failing()
    d.release(REL)
    out = d.finish(["a-1"], CP, at=10 * MIN, outcome="failed")
    assert all("a-1" not in c for *_, c in advances(out))
    assert d.state.clusters["a-1"].failed[0] == "boom"
    assert d.state.clusters["a-1"].target_run[0] == "main-1"
    out = d.command("cancel", at=30 * MIN, command_id="c1", rollout_id="main-1")
    assert d.state.clusters["a-1"].failed[0] is None
    newer = "1.31.14-gke.100"
    out = d.release({"1.30": newer}, event_id="r2", at=40 * MIN)
    assert ("a", "controlPlane", newer, ["a-1"]) in advances(out)
