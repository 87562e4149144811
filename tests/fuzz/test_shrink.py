"""The shrinker keeps what makes a scenario fail and drops the rest, within its budget."""

from __future__ import annotations

from typing import Any

from scenario_gen import generate
from shrink import Shrinker, without_clusters


def _removes_c003(doc: dict[str, Any]) -> bool:
    """A stand-in failure: cluster c-003 exists and some event removes it."""
    names = {c["name"] for c in doc["clusters"]}
    return "c-003" in names and any((e.get("inventory") or {}).get("remove") == "c-003" for e in doc["events"])


def _planted(seed: int = 3) -> dict[str, Any]:
    doc = generate(seed)
    doc["clusters"][3]["maintenanceWindow"] = {"start": "2015-01-01T00:00:00Z", "duration": "1h"}
    doc["events"].append({"at": "1h", "inventory": {"remove": "c-003"}})
    return doc


def test_shrinks_to_the_one_cluster_and_event_the_failure_needs() -> None:
    doc = _planted()
    assert len(doc["clusters"]) > 5 and len(doc["events"]) > 1
    small = Shrinker(_removes_c003).shrink(doc)
    assert _removes_c003(small)
    assert [c["name"] for c in small["clusters"]] == ["c-003"]
    assert small["events"] == [{"at": "1h", "inventory": {"remove": "c-003"}}]
    assert len(small["sequence"]["stages"]) == 1
    assert small["simulation"]["notReady"] == [] and small["simulation"]["failures"] == []
    assert set(small["clusters"][0]) == {"name", "labels", "version"}, "optional cluster fields go"
    assert all(s.get("rolloutStrategy", {}) == {} for s in small["sequence"]["stages"])


def test_keeps_the_input_when_nothing_can_go_and_never_changes_it() -> None:
    doc = _planted()
    before = repr(doc)
    same = Shrinker(lambda d: d == doc).shrink(doc)
    assert same == doc and repr(doc) == before


def test_a_candidate_the_format_refuses_is_not_kept() -> None:
    def refuses_small_fleets(doc: dict[str, Any]) -> bool:
        if len(doc["clusters"]) < 3:
            raise ValueError("fleet too small for this stand-in format")
        return True

    small = Shrinker(refuses_small_fleets).shrink(_planted())
    assert len(small["clusters"]) == 3


def test_stops_at_its_budget_of_predicate_calls() -> None:
    calls = []

    def counting(doc: dict[str, Any]) -> bool:
        calls.append(1)
        return False  # nothing may go: without a budget every candidate would be tried

    doc = _planted()
    shrinker = Shrinker(counting, budget=5)
    assert shrinker.shrink(doc) == doc
    assert len(calls) == shrinker.calls == 5


def test_without_clusters_drops_what_names_them() -> None:
    doc = {
        "clusters": [{"name": "a"}, {"name": "b"}],
        "sequence": {"stages": [{"name": "s0", "clusterNames": ["a", "b"]}]},
        "simulation": {"notReady": [{"cluster": "a", "from": "0s", "until": "1h"}], "failures": [{"cluster": "b"}]},
    }
    out = without_clusters(doc, {"a"})
    assert out["clusters"] == [{"name": "b"}]
    assert out["sequence"]["stages"][0]["clusterNames"] == ["b"]
    assert out["simulation"] == {"notReady": [], "failures": [{"cluster": "b"}]}
    assert doc["clusters"] == [{"name": "a"}, {"name": "b"}], "the input is left alone"


def test_a_sequence_change_in_the_script_shrinks_like_the_first_definition() -> None:
    """SEQ-7 events carry a whole definition; its extra stages and strategy fields go too."""
    doc = _planted()
    doc["events"].append(
        {
            "at": "2h",
            "sequence": {
                "name": "main",
                "stages": [
                    {"name": "s0", "clusterSelector": {"matchLabels": {"env": "s0"}}, "rolloutStrategy": {"maxNew": 3}},
                    {"name": "s1", "clusterSelector": {"matchLabels": {"env": "s1"}}},
                ],
            },
        }
    )

    def needs_the_change(candidate: dict[str, Any]) -> bool:
        return _removes_c003(candidate) and any("sequence" in e for e in candidate["events"])

    small = Shrinker(needs_the_change).shrink(doc)
    change = next(e for e in small["events"] if "sequence" in e)
    assert change["sequence"]["stages"] == [{"name": "s0", "clusterSelector": {"matchLabels": {"env": "s0"}}}]
