"""The generator keeps to one stage per cluster (SEQ-2), the shape the shared checker can judge."""

from __future__ import annotations

from scenario_gen import generate
from single_stage import drop_two_stage_upserts, stages_selecting

SEQUENCE = {
    "name": "main",
    "stages": [
        {"name": "s0", "clusterSelector": {"matchLabels": {"env": "s0"}}},
        {"name": "s1", "clusterGroup": "g1"},
    ],
}
CLUSTERS = [{"name": "c-1", "labels": {"env": "s0"}}]


def test_seq2_an_upsert_into_a_second_stage_is_dropped_and_a_plain_one_kept() -> None:
    both = {"at": "1m", "inventory": {"upsert": {"name": "c-1", "labels": {"env": "s0"}, "group": "g1"}}}
    moved = {"at": "2m", "inventory": {"upsert": {"name": "c-1", "labels": {"env": "s9"}, "group": "g1"}}}
    assert drop_two_stage_upserts(CLUSTERS, SEQUENCE, [both, moved]) == [moved]


def test_seq2_a_refused_sequence_change_leaves_the_one_in_force() -> None:
    """SEQ-2 refuses a sequence change that puts c-1 in two stages, so an upsert judged after it is
    judged against the sequence before it (where c-1's move to env s1 is harmless)."""
    in_s0 = {"matchExpressions": [{"key": "env", "operator": "In", "values": ["s0"]}]}
    conflicting = {
        "name": "main",
        "stages": [
            {"name": "s0", "clusterSelector": in_s0},
            {"name": "s1", "clusterNames": ["c-1"]},
        ],
    }
    change = {"at": "1m", "sequence": conflicting}
    upsert = {"at": "2m", "inventory": {"upsert": {"name": "c-2", "labels": {"env": "s1"}}}}
    assert drop_two_stage_upserts(CLUSTERS, SEQUENCE, [change, upsert]) == [change, upsert]


def test_seq2_no_generated_script_upserts_a_cluster_into_two_stages() -> None:
    for seed in range(400):
        doc = generate(seed)
        in_force = doc["sequence"]
        for entry in doc["events"]:
            if "sequence" in entry:
                in_force = entry["sequence"] if _accepted(doc, entry) else in_force
            upsert = entry.get("inventory", {}).get("upsert")
            if upsert is not None:
                assert stages_selecting(in_force, upsert) <= 1, (seed, entry)


def _accepted(doc: dict, entry: dict) -> bool:
    inventory = {c["name"]: c for c in doc["clusters"]}
    for before in doc["events"]:
        if before is entry:
            break
        change = before.get("inventory", {})
        if "upsert" in change:
            inventory[change["upsert"]["name"]] = change["upsert"]
        elif "remove" in change:
            inventory.pop(change["remove"], None)
    return all(stages_selecting(entry["sequence"], c) <= 1 for c in inventory.values())
