"""Keeps generated scripts inside what the shared checker can judge: one stage per cluster.

The checker's `World.members` gives a cluster that several stages select to the first of them
("the plan check needs one answer"), while SEQ-2 leaves it in neither stage (INELIGIBLE, naming
both). A script whose inventory change makes a cluster match two stages is then judged against a
plan the engine rightly does not follow: the checker reports batches "outside partition All" or
GATE-1 counts with a cluster that is in no partition. The engine's behaviour for that shape is
proved by its own scenario (`tests/scenarios/seq2-*`) and tests, so the generator leaves it out:
an inventory upsert that would put its cluster in two stages, under the sequence in force at that
moment, is dropped from the script. Sequence changes that would do it stay: SEQ-2 refuses them, and
the checker follows the accepted definitions only.

Selectors are evaluated the way the generator writes them (`clusterSelector` with `matchLabels`
and `matchExpressions`, `clusterNames`, `clusterGroup`); the channel is left out on purpose, so
a doubtful upsert is dropped rather than kept.
"""

from __future__ import annotations

from typing import Any

Doc = dict[str, Any]


def _expression_holds(expression: Doc, labels: dict[str, str]) -> bool:
    key, operator = expression["key"], expression["operator"]
    values = expression.get("values", [])
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    return key not in labels  # DoesNotExist


def selects(stage: Doc, cluster: Doc) -> bool:
    """Whether the stage's selector takes the cluster (SEQ-2's membership, channel aside)."""
    if "clusterNames" in stage:
        return cluster["name"] in stage["clusterNames"]
    if "clusterGroup" in stage:
        return cluster.get("group") == stage["clusterGroup"]
    selector = stage.get("clusterSelector", {})
    labels = cluster.get("labels", {})
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    return all(_expression_holds(e, labels) for e in selector.get("matchExpressions", []))


def stages_selecting(sequence: Doc, cluster: Doc) -> int:
    return sum(1 for stage in sequence["stages"] if selects(stage, cluster))


def _conflicts(sequence: Doc, inventory: dict[str, Doc]) -> bool:
    return any(stages_selecting(sequence, c) > 1 for c in inventory.values())


def drop_two_stage_upserts(clusters: list[Doc], sequence: Doc, events: list[Doc]) -> list[Doc]:
    """`events` (in script order) without the inventory upserts that would put their cluster in
    two stages of the sequence in force; a sequence change SEQ-2 refuses leaves that in force."""
    inventory = {c["name"]: c for c in clusters}
    in_force = sequence
    kept: list[Doc] = []
    for entry in events:
        change = entry.get("inventory", {})
        if "upsert" in change:
            if stages_selecting(in_force, change["upsert"]) > 1:
                continue
            inventory[change["upsert"]["name"]] = change["upsert"]
        elif "remove" in change:
            inventory.pop(change["remove"], None)
        elif "sequence" in entry and not _conflicts(entry["sequence"], inventory):
            in_force = entry["sequence"]
        kept.append(entry)
    return kept
