"""Versions and times are bounded where they enter, in the one model of each message (BUS-4, BUS-7):
every topic that carries a version refuses a part over `MAX_PART_DIGITS` digits, naming the field,
so no such version reaches a parser that would raise on it (a 5,000-digit part made the planner's
version parser raise on every republish of one heartbeat); every time field refuses a time beyond
year 9999 or infinite, and a reader with a clock refuses one far ahead of it."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from rollout_common import envelope
from rollout_common.check_results import CheckResult
from rollout_common.commands import CheckSeries, StageAdvance, StageTransition
from rollout_common.epoch import MAX_FUTURE_SKEW_S
from rollout_common.errors import InvalidInputError
from rollout_common.events import (
    Event,
    InventoryChange,
    OperatorCommand,
    Readiness,
    ReleaseTarget,
    SequenceChange,
    StartRollout,
    UpgradeResult,
)
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import Record
from rollout_common.topics.catalog import CHECK_RESULTS, READINESS, UPGRADE_RESULTS
from rollout_common.version import MAX_PART_DIGITS, VersionError, parse_minor, parse_version
from rollout_planner.service.intake import INPUT_TOPICS, Intake

HUGE = "1.31." + "9" * 5000
LONGEST = "1.31." + "9" * MAX_PART_DIGITS + "-gke." + "9" * MAX_PART_DIGITS
V = "1.31.13-gke.1023000"
WALL = 1_767_225_600.0
STAGE = {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}}


def test_version_parts_of_up_to_the_bound_parse() -> None:
    assert parse_version(LONGEST).key == (1, 31, 10**MAX_PART_DIGITS - 1, 10**MAX_PART_DIGITS - 1)


@pytest.mark.parametrize("text", [HUGE, "1.31.1-gke." + "1" * 5000, "9" * 13 + ".1.1"])
def test_a_version_part_over_the_bound_is_not_a_version_and_the_reason_is_short(text: str) -> None:
    """A VersionError (what callers catch), not Python's ValueError on a 4,300-digit conversion."""
    with pytest.raises(VersionError, match=r"is not a version: a part of \d+ digits \(at most 12\)") as caught:
        parse_version(text)
    assert len(str(caught.value)) < 150


def test_a_minor_part_over_the_bound_is_not_a_minor() -> None:
    with pytest.raises(VersionError, match=r"is not a minor version: a part of 5000 digits"):
        parse_minor("1." + "3" * 5000)


def _models() -> list[tuple[type[BaseModel], dict[str, Any], str]]:
    """Each message model that carries a version: a message with the huge version, and the field."""
    cluster = {"name": "c1", "version": V}
    beat = {"cluster": "c1", "ready": True, "observedAt": 1.0}
    advance = {"commandId": "c", "rolloutId": "r", "stage": "s", "track": "nodes", "partition": "All"}
    return [
        (Heartbeat, {**beat, "controlPlaneVersion": "v" + HUGE}, "controlPlaneVersion"),
        (Heartbeat, {**beat, "nodeVersion": HUGE + "+k3s1"}, "nodeVersion"),
        (Readiness, {"cluster": "c1", "ready": True, "controlPlaneVersion": HUGE}, "controlPlaneVersion"),
        (Readiness, {"cluster": "c1", "ready": True, "nodeVersion": HUGE}, "nodeVersion"),
        (InventoryChange, {"action": "upsert", "cluster": {**cluster, "version": HUGE}}, "cluster.version"),
        (InventoryChange, {"action": "upsert", "cluster": {**cluster, "nodeVersion": HUGE}}, "cluster.nodeVersion"),
        (
            InventoryChange,
            {"action": "upsert", "cluster": {**cluster, "nodePools": [{"name": "p", "version": HUGE}]}},
            "cluster.nodePools.0.version",
        ),
        (ReleaseTarget, {"eventId": "r", "channel": "regular", "targets": {"1.30": HUGE}}, "targets.1.30"),
        (ReleaseTarget, {"eventId": "r", "channel": "regular", "targets": {"1." + "3" * 5000: V}}, "targets"),
        (StartRollout, {"eventId": "s", "version": HUGE}, "version"),
        (
            UpgradeResult,
            {"commandId": "c", "cluster": "c1", "track": "nodes", "version": HUGE, "outcome": "succeeded"},
            "version",
        ),
        (StageAdvance, {**advance, "version": HUGE, "clusters": ["c1"]}, "version"),
        (
            StageTransition,
            {"rolloutId": "r", "stage": "s", "track": "nodes", "state": "SOAKING", "version": HUGE, "reason": "x"},
            "version",
        ),
        (
            SequenceChange,
            {"commandId": "c", "sequence": {"name": "m", "stages": [{**STAGE, "soakOverrides": {HUGE: 0}}]}},
            "sequence.stages.0.soakOverrides",
        ),
    ]


@pytest.mark.parametrize(("model", "body", "field"), _models(), ids=lambda v: getattr(v, "__name__", None))
def test_bus4_every_message_with_a_version_refuses_a_part_over_the_bound_naming_the_field(
    model: type[BaseModel], body: dict[str, Any], field: str
) -> None:
    kind = model.model_fields["kind"].default
    value = json.dumps({"kind": kind, **body}).encode()
    headers = {"ce_specversion": b"1.0", "ce_id": b"e-1", "ce_source": b"t"}
    headers["ce_type"] = f"io.rollout.{kind}.v1".encode()
    with pytest.raises(InvalidInputError) as caught:
        envelope.decode(value, headers, (model,))
    reason = str(caught.value)
    assert reason.startswith(f"invalid {model.__name__}: {field}")
    assert "digits (at most 12)" in reason or "longer than 128 characters" in reason
    assert len(reason) < 400, "the reason quotes the version cut"


def test_an_operator_command_may_name_any_text_as_version() -> None:
    """OPS-3: a command naming a version that is not one is acknowledged, rejected (tested in the engine)."""
    command = OperatorCommand(command_id="c", action="soak_override", stage="canary", version=HUGE, soak=0)
    assert command.version == HUGE


# -- times: the planner's intake ---------------------------------------------------------------------


def _record(topic: str, model: BaseModel) -> Record:
    value, headers = envelope.encode(model, event_id="e-1", source="test", at=WALL)
    return Record(topic=topic, partition=0, offset=0, key=None, value=value, headers=headers)


def _readiness(observed_at: float) -> Record:
    return _record(READINESS.name, Readiness(cluster="d-09", ready=False, observed_at=observed_at))


def _result(finished_at: float) -> Record:
    result = UpgradeResult(
        command_id="c", cluster="d-09", track="nodes", version=V, outcome="succeeded", finished_at=finished_at
    )
    return _record(UPGRADE_RESULTS.name, result)


def test_bus7_readiness_far_ahead_of_the_planner_is_refused_with_the_reason() -> None:
    intake = Intake(prefix="", wall=lambda: WALL)
    with pytest.raises(InvalidInputError) as caught:
        intake.decode(_readiness(WALL + 3000), now=WALL)
    assert str(caught.value) == (
        "invalid Readiness: observedAt is 3000 s ahead of the planner's clock (limit max_future_skew_s=30); "
        "check the clock of whoever sent it"
    )


def test_bus7_an_upgrade_result_far_ahead_of_the_planner_is_refused_with_the_reason() -> None:
    intake = Intake(prefix="", wall=lambda: WALL)
    with pytest.raises(InvalidInputError, match=r"^invalid UpgradeResult: finishedAt is 31 s ahead of the planner"):
        intake.decode(_result(WALL + 31), now=WALL)


def test_bus7_times_within_the_skew_are_applied() -> None:
    intake = Intake(prefix="", wall=lambda: WALL)
    assert intake.decode(_readiness(WALL + MAX_FUTURE_SKEW_S), now=WALL) == Readiness(
        cluster="d-09", ready=False, observed_at=WALL + MAX_FUTURE_SKEW_S
    )
    assert isinstance(intake.decode(_result(WALL + 30), now=WALL), UpgradeResult)


def test_bus7_a_time_is_ahead_only_when_ahead_of_both_the_engine_and_the_wall() -> None:
    """The engine's clock may run ahead of the wall (time_scale), or behind it (a test's manual clock):
    reporters stamp with their wall clocks, so neither alone may refuse them."""
    intake = Intake(prefix="", wall=lambda: WALL)
    assert isinstance(intake.decode(_readiness(WALL + 86_400), now=WALL + 86_400), Readiness)  # sped-up engine
    assert isinstance(intake.decode(_readiness(WALL), now=WALL - 86_400), Readiness)  # engine behind the wall
    with pytest.raises(InvalidInputError, match="ahead of the planner's clock"):
        intake.decode(_readiness(WALL + 86_400 + 31), now=WALL + 86_400)


def _check_result(observed_at: float) -> Record:
    result = CheckResult(
        rollout_id="main-1",
        stage="prod",
        check="errors",
        observed_at=observed_at,
        value=0.002,
        outcome="passed",
        reason="0.002: successCondition result < 0.01 holds",
    )
    return _record(CHECK_RESULTS.name, result)


def test_chk2_bus7_the_planner_takes_check_results_and_refuses_one_far_ahead() -> None:
    """CHK-2: check results feed the planner like readiness; one from far ahead would hide every
    newer result of its check (BUS-7), so it is refused with the reason."""
    intake = Intake(prefix="", wall=lambda: WALL)
    assert CHECK_RESULTS.name in intake.topics
    decoded = intake.decode(_check_result(WALL), now=WALL)
    assert isinstance(decoded, CheckResult) and (decoded.check, decoded.observed_at) == ("errors", WALL)
    with pytest.raises(InvalidInputError, match=r"^invalid CheckResult: observedAt is 31 s ahead of the planner"):
        intake.decode(_check_result(WALL + 31), now=WALL)


def test_bus4_bus7_a_poll_decoded_at_once_gives_each_record_what_it_gets_alone() -> None:
    """`Intake.decode_many` (a poll at once) gives each record, in order and across topics, the event
    or the refusal `Intake.decode` gives it alone: a time far ahead, a topic the planner does not
    read and a value the model refuses are refused each with its own reason, the rest decoded."""
    intake = Intake(prefix="", wall=lambda: WALL)
    bad_value = Record(
        topic=READINESS.name,
        partition=0,
        offset=0,
        key=None,
        value=b'{"kind":"readiness"}',
        headers=_readiness(WALL).headers,
    )
    stray = Record(topic="elsewhere", partition=0, offset=0, key=None, value=b"{}", headers={})
    records = [
        _readiness(WALL),
        _result(WALL + 31),
        _readiness(WALL + 3000),
        stray,
        _check_result(WALL),
        bad_value,
        _result(WALL),
        _readiness(WALL - 5),
    ]

    def alone(record: Record) -> object:
        try:
            return intake.decode(record, now=WALL)
        except InvalidInputError as exc:
            return str(exc)

    together = [str(o) if isinstance(o, InvalidInputError) else o for o in intake.decode_many(records, now=WALL)]
    assert together == [alone(record) for record in records]
    assert [isinstance(o, str) for o in together] == [False, True, True, True, False, True, False, False]
    assert together[3] == "topic 'elsewhere' does not feed the planner"


@pytest.mark.parametrize(
    ("since", "interval", "field"),
    [(1e38, 60.0, "since"), (-5.0, 60.0, "since"), (1e9, 1e308, "interval"), (1e9, float("inf"), "interval")],
)
def test_chk2_a_check_series_time_is_bounded_like_every_event_time(since: float, interval: float, field: str) -> None:
    """The check runner reads series from the progress topic: an infinite, negative or far-future
    time is refused there, naming the field, as on every other topic (BUS-4)."""
    with pytest.raises(ValueError, match=field):
        CheckSeries(rollout_id="r", stage="s", check="c", running=True, since=since, interval=interval)


def test_every_model_the_planners_intake_decodes_is_an_engine_event() -> None:
    """The planner hands a poll's events to the engine in an `EventBatch` it builds without
    validating them again (`BatchDecision.decide`): only sound while every model of every topic
    the planner reads is one of the engine's events."""
    union = get_args(get_args(Event)[0])
    decoded = {model for topic in INPUT_TOPICS for model in topic.models}
    assert decoded and decoded <= set(union), sorted(m.__name__ for m in decoded - set(union))
