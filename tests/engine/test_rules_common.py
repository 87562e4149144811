"""Pure functions of libs/common: versions, count-or-percentage, durations, selectors, windows (SPEC 1, 6, 7)."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from rollout_common.duration import format_duration, parse_duration
from rollout_common.quantity import check_count_or_percent, resolve
from rollout_common.selector import LabelSelector
from rollout_common.sequence import RolloutStrategy
from rollout_common.version import Minor, VersionError, parse_minor, parse_version
from rollout_common.window import MaintenanceExclusion, MaintenanceWindow, to_epoch

UTC = dt.UTC


def epoch(text: str) -> float:
    return to_epoch(dt.datetime.fromisoformat(text.replace("Z", "+00:00")))


# ----------------------------------------------------------------------------- versions (SPEC 1)
def test_version_gke_spelling_parses_into_major_minor_patch_build() -> None:
    v = parse_version("1.31.13-gke.1023000")
    assert v.key == (1, 31, 13, 1023000)
    assert v.minor == Minor(1, 31)
    assert str(v.minor) == "1.31"
    assert str(v) == "1.31.13-gke.1023000"


def test_version_plain_spelling_has_build_zero() -> None:
    assert parse_version("1.31.13").key == (1, 31, 13, 0)


def test_version_order_is_major_minor_patch_build_numerically() -> None:
    texts = ["1.31.13-gke.1023000", "1.31.9-gke.5", "1.30.15", "1.31.13-gke.200", "1.31.13", "1.4.0"]
    ordered = [str(v) for v in sorted(parse_version(t) for t in texts)]
    assert ordered == ["1.4.0", "1.30.15", "1.31.9-gke.5", "1.31.13", "1.31.13-gke.200", "1.31.13-gke.1023000"]


def test_version_minor_next_steps_one_minor() -> None:
    assert parse_minor("1.30").next() == Minor(1, 31)
    assert parse_version("1.32.9-gke.1108000").minor > parse_version("1.31.13-gke.1023000").minor


@pytest.mark.parametrize("text", ["1.31", "v1.31.2", "1.31.2-gke", "1.31.2-gke.x", "abc", ""])
def test_version_rejects_what_is_not_a_version(text: str) -> None:
    with pytest.raises(VersionError, match="is not a version"):
        parse_version(text)


@pytest.mark.parametrize("text", ["1", "1.31.2", "x.y"])
def test_version_minor_rejects_non_minor(text: str) -> None:
    with pytest.raises(VersionError, match="is not a minor version"):
        parse_minor(text)


# ----------------------------------------------------------------------------- count or percentage (SPEC 7)
@pytest.mark.parametrize(
    ("value", "total", "expected"),
    [
        ("10%", 5, 1),  # floor 0.5 -> at least 1
        ("49%", 10, 4),
        ("150%", 10, 10),  # at most N
        ("0%", 10, 0),
        ("49%", 100, 49),  # no binary floating point drift
        ("25%", 230, 57),
        ("49%", 1000, 490),
        ("10%", 200, 20),
        ("100%", 7, 7),
        (3, 10, 3),
        (15, 10, 10),  # clamped to N
        (0, 10, 0),
        (5, 0, 0),  # N = 0
        ("10%", 0, 0),
        ("100%", 0, 0),
    ],
)
def test_quantity_resolve_every_spec_example(value: int | str, total: int, expected: int) -> None:
    assert resolve(value, total) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [(-1, "is negative"), ("abc", "neither a count"), ("10", "neither a count"), (True, "boolean"), (1.5, "neither")],
)
def test_quantity_rejects_negative_text_numeric_string_and_bool_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"maxUnavailable: .*{message}"):
        check_count_or_percent(value, field="maxUnavailable")


def test_quantity_accepts_counts_and_percentages_as_given() -> None:
    assert check_count_or_percent(0, field="x") == 0
    assert check_count_or_percent("10%", field="x") == "10%"
    assert check_count_or_percent("0%", field="x") == "0%"
    # as strict as the published schema: what the schema refuses, the services refuse (BUS-2)
    with pytest.raises(ValueError, match="x: ' 10% ' is neither a count"):
        check_count_or_percent(" 10% ", field="x")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("maxUnavailable", -1),
        ("maxUnavailable", "abc"),
        ("maxUnavailable", "10"),
        ("maxUnavailablePartitions", "10"),
        ("maxUnavailablePartitions", -2),
        ("autoPartitionSize", "abc"),
        ("maxFailures", "x%"),
    ],
)
def test_strategy_rejects_bad_quantities_with_a_message_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RolloutStrategy.model_validate({field: value})
    assert field in str(info.value)


@pytest.mark.parametrize("value", [0, -1])
def test_strategy_rejects_max_new_below_one_naming_max_new(value: int) -> None:
    with pytest.raises(ValidationError) as info:
        RolloutStrategy.model_validate({"maxNew": value})
    assert "maxNew" in str(info.value)


@pytest.mark.parametrize("value", ["0%", 0])
def test_strategy_rejects_auto_partition_size_resolving_to_zero_naming_the_field(value: object) -> None:
    with pytest.raises(ValidationError) as info:
        RolloutStrategy.model_validate({"autoPartitionSize": value})
    assert "autoPartitionSize" in str(info.value)


def test_strategy_defaults_are_fleets() -> None:
    s = RolloutStrategy()
    assert (
        s.max_unavailable,
        s.max_unavailable_partitions,
        s.auto_partition_size,
        s.auto_partition_threshold,
        s.max_new,
        s.partitions,
        s.max_concurrent,
        s.max_failures,
    ) == ("100%", 0, "25%", 200, 50, (), None, None)


def test_strategy_accepts_a_fleet_block_as_it_is() -> None:
    s = RolloutStrategy.model_validate(
        {
            "maxUnavailable": "10%",
            "maxUnavailablePartitions": 1,
            "autoPartitionSize": "10%",
            "autoPartitionThreshold": 0,
            "maxNew": 5,
            "partitions": [{"name": "canary", "maxUnavailable": 0, "clusterSelector": {"matchLabels": {"c": "true"}}}],
        }
    )
    assert s.partitions[0].max_unavailable == 0
    assert s.auto_partition_threshold == 0


# ----------------------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("4h", 14400), ("7d", 604800), ("14d10m", 1210200), ("0d", 0), (42, 42)],
)
def test_duration_parses_units_and_combinations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["7", "7w", "d7", "1h 2m", "", "-1d", True])
def test_duration_rejects_other_spellings_naming_the_field(text: object) -> None:
    with pytest.raises(ValueError, match="soak"):
        parse_duration(text, field="soak")


def test_duration_formats_shortest() -> None:
    assert format_duration(1210200) == "14d10m"
    assert format_duration(0) == "0s"
    assert format_duration(3661) == "1h1m1s"


# ----------------------------------------------------------------------------- selectors (SEQ-5)
def selector(**raw: object) -> LabelSelector:
    return LabelSelector.model_validate(raw)


@pytest.mark.parametrize(
    ("expr", "labels", "expected"),
    [
        ({"key": "env", "operator": "In", "values": ["prod", "stg"]}, {"env": "stg"}, True),
        ({"key": "env", "operator": "In", "values": ["prod"]}, {"env": "dev"}, False),
        ({"key": "env", "operator": "In", "values": ["prod"]}, {}, False),
        ({"key": "env", "operator": "NotIn", "values": ["prod"]}, {"env": "dev"}, True),
        ({"key": "env", "operator": "NotIn", "values": ["prod"]}, {}, True),
        ({"key": "env", "operator": "NotIn", "values": ["prod"]}, {"env": "prod"}, False),
        ({"key": "env", "operator": "Exists"}, {"env": ""}, True),
        ({"key": "env", "operator": "Exists"}, {"other": "x"}, False),
        ({"key": "env", "operator": "DoesNotExist"}, {"other": "x"}, True),
        ({"key": "env", "operator": "DoesNotExist"}, {"env": "x"}, False),
    ],
)
def test_seq_5_selector_operators(expr: dict[str, object], labels: dict[str, str], expected: bool) -> None:
    assert selector(matchExpressions=[expr]).matches(labels) is expected


def test_seq_5_selector_match_labels_and_expressions_must_all_hold() -> None:
    sel = selector(matchLabels={"env": "prod"}, matchExpressions=[{"key": "tier", "operator": "Exists"}])
    assert sel.matches({"env": "prod", "tier": "1"})
    assert not sel.matches({"env": "prod"})
    assert not sel.matches({"env": "dev", "tier": "1"})
    assert selector().matches({"anything": "x"})


def test_seq_5_selector_yaml_booleans_become_label_text() -> None:
    assert selector(matchLabels={"canary": True}).matches({"canary": "true"})


@pytest.mark.parametrize(
    "expr",
    [
        {"key": "a", "operator": "In"},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "Near", "values": ["x"]},
    ],
)
def test_seq_5_selector_rejects_values_that_do_not_fit_the_operator(expr: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        selector(matchExpressions=[expr])


# ----------------------------------------------------------------------------- windows (WIN-1, WIN-4)
DAILY = MaintenanceWindow.model_validate(
    {"start": "2026-01-04T22:00:00Z", "duration": "4h", "recurrence": "FREQ=DAILY"}
)


@pytest.mark.parametrize(
    ("at", "is_open"),
    [
        ("2026-01-05T22:00:00Z", True),  # opening instant included
        ("2026-01-06T01:59:59Z", True),
        ("2026-01-06T02:00:00Z", False),  # closing instant excluded
        ("2026-01-05T08:00:00Z", False),
        ("2026-01-04T21:59:59Z", False),  # before the first occurrence
    ],
)
def test_win_1_daily_window_open_and_closed(at: str, is_open: bool) -> None:
    assert DAILY.is_open(epoch(at)) is is_open


def test_win_4_next_open_of_a_daily_window() -> None:
    assert DAILY.next_open(epoch("2026-01-05T08:00:00Z")) == epoch("2026-01-05T22:00:00Z")
    assert DAILY.next_open(epoch("2026-01-05T23:00:00Z")) == epoch("2026-01-05T23:00:00Z")  # open now
    assert DAILY.next_open(epoch("2026-01-06T02:00:00Z")) == epoch("2026-01-06T22:00:00Z")


def test_win_4_next_open_of_a_weekly_rrule() -> None:
    weekly = MaintenanceWindow.model_validate(
        {"start": "2026-01-03T01:00:00Z", "duration": "6h", "recurrence": "FREQ=WEEKLY;BYDAY=SA,SU"}
    )
    # Monday 2026-01-05 noon -> Saturday 2026-01-10 01:00
    assert weekly.next_open(epoch("2026-01-05T12:00:00Z")) == epoch("2026-01-10T01:00:00Z")
    assert weekly.is_open(epoch("2026-01-04T06:59:00Z"))
    assert not weekly.is_open(epoch("2026-01-04T07:00:00Z"))


def test_win_4_one_off_window_never_opens_again() -> None:
    once = MaintenanceWindow.model_validate({"start": "2026-01-02T00:00:00Z", "duration": "1h"})
    assert once.next_open(epoch("2026-01-01T00:00:00Z")) == epoch("2026-01-02T00:00:00Z")
    assert once.next_open(epoch("2026-01-02T01:00:00Z")) is None


@pytest.mark.parametrize("bad", [{"duration": "0s"}, {"recurrence": "FREQ=SOMETIMES"}, {"duration": "4x"}])
def test_win_1_window_rejects_bad_duration_or_rrule(bad: dict[str, str]) -> None:
    raw = {"start": "2026-01-01T00:00:00Z", "duration": "1h", **bad}
    with pytest.raises(ValidationError):
        MaintenanceWindow.model_validate(raw)


# ----------------------------------------------------------------------------- exclusions (WIN-2)
def exclusion(scope: str) -> MaintenanceExclusion:
    return MaintenanceExclusion.model_validate(
        {"start": "2026-01-01T00:00:00Z", "end": "2026-01-10T00:00:00Z", "scope": scope}
    )


@pytest.mark.parametrize(
    ("scope", "nodes", "minor_change", "blocks"),
    [
        ("NO_UPGRADES", False, False, True),
        ("NO_UPGRADES", True, False, True),
        ("NO_MINOR_UPGRADES", False, False, False),
        ("NO_MINOR_UPGRADES", False, True, True),
        ("NO_MINOR_UPGRADES", True, False, False),
        ("NO_MINOR_UPGRADES", True, True, True),
        ("NO_MINOR_OR_NODE_UPGRADES", False, False, False),
        ("NO_MINOR_OR_NODE_UPGRADES", False, True, True),
        ("NO_MINOR_OR_NODE_UPGRADES", True, False, True),
    ],
)
def test_win_2_exclusion_scopes(scope: str, nodes: bool, minor_change: bool, blocks: bool) -> None:
    at = epoch("2026-01-05T00:00:00Z")
    assert exclusion(scope).blocks(at=at, nodes=nodes, minor_change=minor_change) is blocks


def test_win_2_exclusion_is_half_open_and_defaults_to_no_upgrades() -> None:
    e = MaintenanceExclusion.model_validate({"start": "2026-01-01T00:00:00Z", "end": "2026-01-10T00:00:00Z"})
    assert e.blocks(at=epoch("2026-01-01T00:00:00Z"), nodes=False, minor_change=False)
    assert not e.blocks(at=epoch("2026-01-10T00:00:00Z"), nodes=False, minor_change=False)


def test_win_2_exclusion_must_end_after_it_starts() -> None:
    with pytest.raises(ValidationError, match="end must be after start"):
        MaintenanceExclusion.model_validate({"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"})
