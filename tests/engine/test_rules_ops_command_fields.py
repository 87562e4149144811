"""OPS-3 validates every operator command: a field its action does not take is a rejection with
the reason, never silently ignored (a pause naming a stage used to pause the whole rollout)."""

from __future__ import annotations

from enginekit import MIN, V31, Driver, acks, cluster, sequence, stage

from rollout_common.events import OperatorCommand

REL = {"1.30": V31}


def _driver() -> Driver:
    d = Driver(sequence(stage("a", soak="1d"), stage("b")), [cluster("a-1"), cluster("b-1")])
    d.release(REL)
    return d


def test_ops_3_a_pause_naming_a_stage_or_cluster_is_rejected_and_pauses_nothing() -> None:
    d = _driver()
    out = d.send(OperatorCommand(command_id="c1", action="pause", rollout_id="main-1", stage="a"), at=MIN)
    out += d.send(OperatorCommand(command_id="c2", action="cancel", all_rollouts=True, cluster="a-1"), at=MIN)
    out += d.send(OperatorCommand(command_id="c3", action="resume", rollout_id="main-1", version=V31), at=MIN)
    whole = "it applies to a whole rollout (rolloutId, or all) (OPS-1, OPS-5)"
    assert acks(out) == [
        ("c1", False, f"pause takes no stage: {whole}"),
        ("c2", False, f"cancel takes no cluster: {whole}"),
        ("c3", False, f"resume takes no version: {whole}"),
    ]
    rollout = d.state.rollouts["main-1"]
    assert (rollout.paused, rollout.state.value) == (False, "RUNNING")


def test_ops_2_a_soak_override_naming_a_rollout_is_rejected_retry_keeps_its_narrowing() -> None:
    d = _driver()
    out = d.send(
        OperatorCommand(command_id="c1", action="soak_override", all_rollouts=True, stage="a", version=V31, soak=0),
        at=MIN,
    )
    out += d.send(OperatorCommand(command_id="c2", action="retry", rollout_id="main-1", stage="a", soak=60), at=MIN)
    out += d.send(OperatorCommand(command_id="c3", action="soak_override", stage="a", version=V31, soak=0), at=MIN)
    assert acks(out) == [
        (
            "c1",
            False,
            "soak_override takes no all: an override is for a stage and a version, whatever the rollout "
            "(stage, version, soak) (OPS-2)",
        ),
        (
            "c2",
            False,
            "retry takes no soak: it narrows to a stage or a cluster of a rollout (rolloutId, or all) (OPS-4)",
        ),
        ("c3", True, "soak_override applied"),
    ]
