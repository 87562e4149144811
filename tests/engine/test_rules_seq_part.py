"""Sequence validation (SEQ-1..5, SOAK-3) and partition planning (PART-2..4) as pure functions."""

from __future__ import annotations

from typing import Any

import pytest
from enginekit import cluster, names, sequence, stage
from pydantic import ValidationError

from rollout_common.sequence import Sequence, Stage
from rollout_planner.engine.partitioning import assign_stages, plan_partitions


def seq(stages: list[dict[str, Any]], **extra: Any) -> Sequence:
    return Sequence.model_validate({"name": "main", "channel": "regular", "stages": stages, **extra})


def sel(env: str) -> dict[str, Any]:
    return {"matchLabels": {"env": env}}


# ----------------------------------------------------------------------------- SEQ-1
def test_seq_1_stages_naming_upstreams_are_ordered_linearly() -> None:
    s = seq(
        [
            {"name": "prod", "upstream": "stg", "clusterSelector": sel("prod")},
            {"name": "test", "clusterSelector": sel("test")},
            {"name": "stg", "upstream": "test", "clusterSelector": sel("stg")},
        ]
    )
    assert [x.name for x in s.stages] == ["test", "stg", "prod"]


def test_seq_1_branch_is_rejected_naming_the_stage() -> None:
    with pytest.raises(ValidationError, match=r"stage 'b2'.*'a' already has downstream 'b1'.*SEQ-1"):
        seq(
            [
                {"name": "a", "clusterSelector": sel("a")},
                {"name": "b1", "upstream": "a", "clusterSelector": sel("b1")},
                {"name": "b2", "upstream": "a", "clusterSelector": sel("b2")},
            ]
        )


def test_seq_1_cycle_is_rejected_naming_a_stage_of_it() -> None:
    with pytest.raises(ValidationError, match=r"stage '(b|c)' is part of a cycle \(SEQ-1\)"):
        seq(
            [
                {"name": "a", "clusterSelector": sel("a")},
                {"name": "b", "upstream": "c", "clusterSelector": sel("b")},
                {"name": "c", "upstream": "b", "clusterSelector": sel("c")},
            ]
        )


def test_seq_1_unknown_upstream_is_rejected_naming_the_stage() -> None:
    with pytest.raises(ValidationError, match=r"stage 'b': upstream 'nope' is not a stage"):
        seq(
            [{"name": "a", "clusterSelector": sel("a")}, {"name": "b", "upstream": "nope", "clusterSelector": sel("b")}]
        )


def test_seq_1_duplicate_stage_name_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"stage 'a' is defined twice"):
        seq([{"name": "a", "clusterSelector": sel("a")}, {"name": "a", "clusterSelector": sel("b")}])


# ----------------------------------------------------------------------------- SEQ-4, SEQ-5
def test_seq_4_no_fixed_stage_limit_but_a_configurable_one() -> None:
    many = [{"name": f"s{i}", "clusterSelector": sel(f"s{i}")} for i in range(8)]
    assert len(seq(many).stages) == 8
    with pytest.raises(ValidationError, match=r"8 stages exceed maxStages 5 \(SEQ-4\)"):
        seq(many, maxStages=5)


def test_seq_5_stage_needs_exactly_one_membership_rule() -> None:
    with pytest.raises(ValidationError, match="needs clusterSelector, clusterNames or clusterGroup"):
        Stage.model_validate({"name": "x"})
    with pytest.raises(ValidationError, match="choose one of clusterSelector, clusterNames"):
        Stage.model_validate({"name": "x", "clusterSelector": sel("x"), "clusterNames": ["a"]})


def test_seq_5_stage_by_names_by_group_and_by_selector() -> None:
    s = seq(
        [
            {"name": "named", "clusterNames": ["n-1"]},
            {"name": "grouped", "clusterGroup": "canaries"},
            {
                "name": "selected",
                "clusterSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
            },
        ]
    )
    fleet = [
        cluster("n-1", labels={}),
        cluster("g-1", labels={}, group="canaries"),
        cluster("s-1", labels={"tier": "gold"}),
        cluster("s-2", labels={"tier": "bronze"}),
    ]
    m = assign_stages(s, fleet)
    assert m.stage_of == {"n-1": 0, "g-1": 1, "s-1": 2}
    assert m.unmatched == ["s-2"]


# ----------------------------------------------------------------------------- SEQ-2, SEQ-3
def test_seq_2_cluster_in_two_stages_is_reported_and_joins_neither() -> None:
    s = seq([{"name": "a", "clusterSelector": sel("x")}, {"name": "b", "clusterNames": ["x-1"]}])
    m = assign_stages(s, [cluster("x-1", labels={"env": "x"}), cluster("x-2", labels={"env": "x"})])
    assert m.conflicts == {"x-1": ["a", "b"]}
    assert m.stage_of == {"x-2": 0}


def test_seq_3_cluster_on_another_channel_is_reported_not_placed() -> None:
    s = seq([{"name": "a", "clusterSelector": sel("a")}])
    m = assign_stages(s, [cluster("a-1"), cluster("a-2", channel="rapid"), cluster("z-1", channel="rapid")])
    assert m.stage_of == {"a-1": 0}
    assert m.other_channel == ["a-2"]  # z-1 matches no stage: not this sequence's business


# ----------------------------------------------------------------------------- SOAK-3
@pytest.mark.parametrize(("soak", "seconds"), [("0d", 0.0), ("30d", 2_592_000.0), ("14d", 1_209_600.0)])
def test_soak_3_soak_between_0_and_30_days_inclusive(soak: str, seconds: float) -> None:
    assert Stage.model_validate({"name": "a", "clusterNames": ["x"], "soak": soak}).soak == seconds


def test_soak_3_default_soak_is_7_days() -> None:
    assert Stage.model_validate({"name": "a", "clusterNames": ["x"]}).soak == 7 * 86400


@pytest.mark.parametrize("soak", ["30d1s", "31d", "-1d"])
def test_soak_3_soak_outside_range_is_rejected(soak: str) -> None:
    with pytest.raises(ValidationError, match="soak"):
        Stage.model_validate({"name": "a", "clusterNames": ["x"], "soak": soak})


def test_soak_3_per_version_overrides_validated_and_used() -> None:
    st = Stage.model_validate(
        {
            "name": "a",
            "clusterNames": ["x"],
            "soak": "14d",
            "soakOverrides": {"1.31.13-gke.1023000": "0d", "1.32.9": "30d"},
        }
    )
    assert st.soak_for("1.31.13-gke.1023000") == 0
    assert st.soak_for("1.32.9") == 30 * 86400
    assert st.soak_for("1.33.5-gke.1162000") == 14 * 86400
    with pytest.raises(ValidationError, match=r"soakOverrides\[1.31.13\]"):
        Stage.model_validate({"name": "a", "clusterNames": ["x"], "soakOverrides": {"1.31.13": "31d"}})


# ----------------------------------------------------------------------------- PART-3
def plan(count: int, **strategy: Any) -> tuple[list[int], list[int]]:
    st = Stage.model_validate({"name": "p", "clusterSelector": sel("p"), "rolloutStrategy": strategy})
    p = plan_partitions(st, [cluster(n) for n in names("p", count, 4)])
    return [len(x.clusters) for x in p.partitions], [x.max_unavailable for x in p.partitions]


@pytest.mark.parametrize(
    ("count", "strategy", "sizes"),
    [
        (200, {}, [50, 50, 50, 50]),
        (199, {}, [199]),
        (230, {"autoPartitionSize": "25%"}, [57, 57, 57, 57, 2]),
        (1000, {"autoPartitionSize": "49%"}, [490, 490, 20]),
        (200, {"autoPartitionSize": "10%"}, [20] * 10),
        (50, {"autoPartitionThreshold": 50, "autoPartitionSize": "50%"}, [25, 25]),
        (49, {"autoPartitionThreshold": 50, "autoPartitionSize": "50%"}, [49]),
        (200, {"autoPartitionSize": 100}, [100, 100]),
        (500, {"autoPartitionThreshold": 0}, [500]),
        (0, {}, [0]),
    ],
)
def test_part_3_automatic_partition_sizes(count: int, strategy: dict[str, Any], sizes: list[int]) -> None:
    assert plan(count, **strategy)[0] == sizes


def test_part_3_max_unavailable_resolved_per_partition() -> None:
    assert plan(230, autoPartitionSize="25%", maxUnavailable="10%")[1] == [5, 5, 5, 5, 1]
    assert plan(100, maxUnavailable="10%")[1] == [10]
    assert plan(200, autoPartitionSize="10%", maxUnavailable="10%")[1] == [2] * 10
    assert plan(200, maxUnavailable=60)[1] == [50, 50, 50, 50]


def test_part_4_partitions_follow_plain_string_order_of_names() -> None:
    st = Stage.model_validate(
        {
            "name": "p",
            "clusterSelector": sel("p"),
            "rolloutStrategy": {"autoPartitionThreshold": 2, "autoPartitionSize": 2},
        }
    )
    fleet = [cluster(n, labels={"env": "p"}) for n in ["p-10", "p-9", "p-1", "p-2"]]
    p = plan_partitions(st, fleet)
    assert [list(x.clusters) for x in p.partitions] == [["p-1", "p-10"], ["p-2", "p-9"]]


def test_gate_4_plan_warns_about_maxunavailable_100_percent() -> None:
    st = Stage.model_validate({"name": "p", "clusterSelector": sel("p")})
    assert any("GATE-4" in w for w in plan_partitions(st, [cluster("p-1")]).warnings)
    st = Stage.model_validate({"name": "p", "clusterSelector": sel("p"), "rolloutStrategy": {"maxUnavailable": 1}})
    assert plan_partitions(st, [cluster("p-1")]).warnings == []


# ----------------------------------------------------------------------------- PART-2
def manual_stage(*partitions: dict[str, Any], **strategy: Any) -> Stage:
    return Stage.model_validate(
        {"name": "p", "clusterSelector": {}, "rolloutStrategy": {"partitions": list(partitions), **strategy}}
    )


def test_part_2_manual_partitions_in_listed_order_with_their_own_max_unavailable() -> None:
    st = manual_stage(
        {"name": "late", "clusterSelector": {"matchLabels": {"ring": "2"}}},
        {"name": "early", "maxUnavailable": "50%", "clusterSelector": {"matchLabels": {"ring": "1"}}},
        maxUnavailable=0,
    )
    fleet = [cluster(f"c-{i}", labels={"ring": str(1 + i % 2)}) for i in range(6)]
    p = plan_partitions(st, fleet)
    assert [(x.name, list(x.clusters), x.max_unavailable) for x in p.partitions] == [
        ("late", ["c-1", "c-3", "c-5"], 0),
        ("early", ["c-0", "c-2", "c-4"], 1),
    ]


def test_part_2_unmatched_cluster_is_no_partition_with_a_warning() -> None:
    st = manual_stage({"name": "one", "clusterName": "c-1"})
    p = plan_partitions(st, [cluster("c-1"), cluster("c-2")])
    assert p.no_partition == ["c-2"]
    assert p.members == ["c-1"]
    assert any("NO_PARTITION" in w and "c-2" in w for w in p.warnings)


def test_part_2_overlap_goes_to_first_partition_only_with_a_warning() -> None:
    st = manual_stage(
        {"name": "canary", "clusterSelector": {"matchLabels": {"canary": "true"}}},
        {"name": "all", "clusterSelector": {}},
    )
    p = plan_partitions(st, [cluster("c-1", labels={"canary": "true"}), cluster("c-2", labels={})])
    assert [list(x.clusters) for x in p.partitions] == [["c-1"], ["c-2"]]
    assert any("c-1 matches partitions canary and all" in w for w in p.warnings)


def test_part_2_every_criterion_that_is_set_must_match() -> None:
    st = manual_stage(
        {
            "name": "x",
            "clusterGroup": "g",
            "clusterSelector": {"matchLabels": {"tier": "1"}},
            "clusterGroupSelector": {"matchLabels": {"region": "eu"}},
        }
    )
    fleet = [
        cluster("ok", labels={"tier": "1"}, group="g", groupLabels={"region": "eu"}),
        cluster("wrong-group", labels={"tier": "1"}, group="h", groupLabels={"region": "eu"}),
        cluster("wrong-region", labels={"tier": "1"}, group="g", groupLabels={"region": "us"}),
        cluster("wrong-label", labels={"tier": "2"}, group="g", groupLabels={"region": "eu"}),
    ]
    p = plan_partitions(st, fleet)
    assert list(p.partitions[0].clusters) == ["ok"]
    assert p.no_partition == ["wrong-group", "wrong-label", "wrong-region"]


def test_part_2_partition_without_criteria_matches_nothing() -> None:
    p = plan_partitions(manual_stage({"name": "empty"}), [cluster("c-1")])
    assert p.no_partition == ["c-1"]


def test_part_2_duplicate_partition_names_rejected() -> None:
    with pytest.raises(ValidationError, match="partition name 'x' is used twice"):
        manual_stage({"name": "x", "clusterName": "a"}, {"name": "x", "clusterName": "b"})


def test_sequence_helper_builds_valid_stages() -> None:
    assert [s.name for s in sequence(stage("a"), stage("b")).stages] == ["a", "b"]
