"""Cluster groups as inventory objects (Fleet's ClusterGroup, SEQ-5, PART-2): stages and partitions select
by group name and by group labels; a group's change moves clusters visibly (SEQ-6); snapshots keep groups."""

from __future__ import annotations

from enginekit import DAY, T0, V31, cluster, sequence, stage

from rollout_common.commands import Notice
from rollout_common.events import InventoryChange, ReleaseTarget
from rollout_common.fleet import ClusterGroup
from rollout_planner.engine import decide, new_state
from rollout_planner.engine.snapshot import dump, load

EAST = ClusterGroup.model_validate(
    {"name": "east", "labels": {"region": "us-east"}, "selector": {"matchLabels": {"zone": "e"}}}
)
WEST = ClusterGroup.model_validate(
    {"name": "west", "labels": {"region": "us-west"}, "selector": {"matchLabels": {"zone": "w"}}}
)


def _fleet() -> list[object]:
    return [cluster(f"prod-{i}", labels={"env": "prod", "zone": "e" if i < 3 else "w"}) for i in range(5)]


def _partitions(state: object) -> dict[str, list[str]]:
    return {p.name: p.members for p in state.stages[0].partitions}  # type: ignore[attr-defined]


def test_part2_cluster_group_selector_matches_the_groups_labels() -> None:
    by_region = stage(
        "prod",
        soak=DAY,
        rolloutStrategy={
            "partitions": [
                {"name": "first", "clusterGroupSelector": {"matchLabels": {"region": "us-east"}}},
                {
                    "name": "second",
                    "clusterGroupSelector": {
                        "matchExpressions": [{"key": "region", "operator": "In", "values": ["us-west"]}]
                    },
                },
            ]
        },
    )
    state = new_state(sequence(by_region), _fleet(), [EAST, WEST])  # type: ignore[arg-type]
    assert _partitions(state) == {"first": ["prod-0", "prod-1", "prod-2"], "second": ["prod-3", "prod-4"]}
    assert state.stages[0].no_partition == []


def test_seq5_a_stage_selects_by_group_name() -> None:
    state = new_state(sequence(stage("east", clusterGroup="east")), _fleet(), [EAST])  # type: ignore[arg-type]
    assert state.stages[0].members == ["prod-0", "prod-1", "prod-2"]


def test_seq6_a_group_published_to_the_inventory_moves_clusters_and_names_the_stage() -> None:
    state = new_state(sequence(stage("canary", clusterGroup="east"), stage("rest", clusterGroup="west")), _fleet())  # type: ignore[arg-type]
    assert [s.members for s in state.stages] == [[], []]
    state, out = decide(state, InventoryChange(action="upsert", cluster_group=EAST), T0)
    assert state.stages[0].members == ["prod-0", "prod-1", "prod-2"]
    moves = [c for c in out if isinstance(c, Notice) and c.code == "SEQ-6"]
    assert [(m.cluster, m.stage) for m in moves] == [("prod-0", "canary"), ("prod-1", "canary"), ("prod-2", "canary")]
    assert moves[0].message == "cluster prod-0 moved from no stage to canary (cluster group east: upsert)"
    state, out = decide(state, InventoryChange(action="upsert", cluster_group=EAST), T0)
    assert out == [], "the same group again changes nothing"
    state, out = decide(state, InventoryChange(action="remove", cluster_group=EAST), T0)
    assert state.stages[0].members == []
    assert next(m.message for m in out if isinstance(m, Notice)) == (
        "cluster prod-0 moved from canary to no stage (cluster group east: remove)"
    )


def test_seq6_a_group_change_under_a_running_rollout_keeps_the_counts_right() -> None:
    two = sequence(stage("canary", clusterGroup="east", soak=DAY), stage("rest", clusterGroup="west"))
    state = new_state(two, _fleet(), [EAST, WEST])  # type: ignore[arg-type]
    state, _ = decide(state, ReleaseTarget(event_id="r1", channel="regular", targets={"1.30": V31}), T0)
    moved = EAST.model_copy(update={"selector": WEST.selector})
    state, _ = decide(state, InventoryChange(action="upsert", cluster_group=moved), T0 + 1)
    # east now selects the west zone: prod-0..2 leave canary mid-rollout, and prod-3/4 are in both
    # groups, so both stages select them and they join neither (SEQ-2)
    assert state.stages[0].members == [] and state.stages[1].members == []
    assert sum(len(s.members) for s in state.stages) == 0


def test_bus6_a_snapshot_keeps_the_groups() -> None:
    state = new_state(sequence(stage("east", clusterGroup="east")), _fleet(), [EAST])  # type: ignore[arg-type]
    again = load(dump(state))
    assert again.groups == {"east": EAST}
    assert again.stages[0].members == ["prod-0", "prod-1", "prod-2"]


def test_a_groups_inventory_key_is_never_a_clusters() -> None:
    from rollout_common.topics.catalog import INVENTORY

    assert INVENTORY.key(InventoryChange(action="upsert", cluster_group=EAST)) == "group/east"
    assert INVENTORY.key(InventoryChange(action="remove", name="east")) == "east"
