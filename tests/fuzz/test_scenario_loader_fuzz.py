"""The file loader only ever returns a model or a validation error naming the field: never a traceback.

Hypothesis mutates a valid scenario (replacing, deleting and retyping values at random paths) and
writes arbitrary text too; `validate_file` must answer with findings, and every problem must
start with the dotted path of a field (or name the file for unreadable YAML).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_planner.simulation.validation import validate_file

BASE: dict[str, Any] = {
    "name": "fuzz",
    "clusters": [
        {
            "name": "a-1",
            "labels": {"env": "a"},
            "version": "1.30.5-gke.1000",
            "maintenanceWindow": {"start": "2026-01-01T22:00:00Z", "duration": "4h", "recurrence": "FREQ=DAILY"},
            "exclusions": [{"start": "2026-01-02T00:00:00Z", "end": "2026-01-03T00:00:00Z", "scope": "NO_UPGRADES"}],
        },
        {"name": "b-1", "labels": {"env": "b"}, "version": "1.31.2", "nodePools": [{"name": "p", "version": "1.31.2"}]},
    ],
    "generate": [{"count": 3, "name": "g-{i}", "labels": {"env": "b"}, "version": "1.30.1"}],
    "sequence": {
        "name": "main",
        "channel": "regular",
        "stages": [
            {
                "name": "a",
                "clusterSelector": {"matchLabels": {"env": "a"}},
                "soak": "1d",
                "rolloutStrategy": {
                    "maxUnavailable": "10%",
                    "maxNew": 5,
                    "partitions": [
                        {
                            "name": "p1",
                            "clusterSelector": {
                                "matchExpressions": [{"key": "env", "operator": "In", "values": ["a"]}]
                            },
                        }
                    ],
                },
            },
            {"name": "b", "clusterSelector": {"matchLabels": {"env": "b"}}, "soakOverrides": {"1.31.13": "0d"}},
        ],
    },
    "simulation": {
        "upgradeDuration": {"controlPlane": "10m", "nodes": "30m"},
        "readyAfter": "1m",
        "notReady": [{"cluster": "a-1", "from": "0s", "until": "1h"}],
        "failures": [{"cluster": "b-1", "track": "nodes"}],
    },
    "events": [
        {"at": "0s", "releaseTarget": {"channel": "regular", "targets": {"1.30": "1.31.13-gke.1023000"}}},
        {"at": "1d", "command": {"soakOverride": {"stage": "a", "version": "1.31.13-gke.1023000", "soak": "0d"}}},
    ],
    "until": "10d",
}

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.sampled_from(["-1", "10", "0%", "150%", "abc%", "1.30", "FREQ=BOGUS", "99d", "In", "Exists"]),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


PATHS = _paths(BASE)


def _mutate(doc: dict[str, Any], path: tuple[Any, ...], value: Any, delete: bool) -> dict[str, Any]:
    mutated = copy.deepcopy(doc)
    parent: Any = mutated
    for key in path[:-1]:
        parent = parent[key]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return mutated


def _check(path: Path) -> None:
    findings = validate_file(path)
    for problem in findings.problems:
        assert problem and "Traceback" not in problem


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(edits=st.lists(st.tuples(st.sampled_from(PATHS), JUNK, st.booleans()), min_size=1, max_size=3))
def test_mutated_scenarios_give_findings_not_tracebacks(tmp_path: Path, edits: list[Any]) -> None:
    doc = BASE
    for path, value, delete in edits:
        try:
            doc = _mutate(doc, path, value, delete)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or retyped this path's parent
    file = tmp_path / "scenario.yaml"
    file.write_text(yaml.safe_dump(doc))
    _check(file)


@FAST
@given(text=st.text(max_size=200))
def test_arbitrary_text_gives_findings_not_tracebacks(tmp_path: Path, text: str) -> None:
    file = tmp_path / "scenario.yaml"
    file.write_text(text)
    _check(file)


def test_the_unmutated_base_is_valid(tmp_path: Path) -> None:
    file = tmp_path / "scenario.yaml"
    file.write_text(yaml.safe_dump(BASE))
    assert validate_file(file).problems == []
