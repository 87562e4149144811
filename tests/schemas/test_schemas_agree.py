"""BUS-2: the published JSON Schemas are as strict as the services. For every event type, messages are
generated from a valid one by changing one field at a time to values the services accept or refuse;
JSON Schema validation (jsonschema, the draft each schema declares) and the pydantic model must give
the same answer on every one.

Rules across fields or items (a linear sequence, SEQ-1; unique names; node versions not above the
control plane; a window's recurrence rule) are the services' alone and are not generated here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from rollout_cli.main import main
from rollout_common.topics import ALL
from rollout_common.topics.schemas import DRAFT, event_schema

V = "1.31.13-gke.1023000"

# a part of at most 12 digits (MAX_PART_DIGITS): 5,000 stopped the planner's version parser
GOOD_VERSIONS = ["1.31.13-gke.1023000", "1.31.2", "10.0.0-gke.0", "1.31.999999999999-gke.999999999999"]
BAD_VERSIONS = [
    "1.31." + "9" * 5000,
    "1.31.1-gke.1234567890123",
    "1.31",
    "1.31.2-gke",
    "1.31.2-gke.",
    " 1.31.2",
    "1.31.2 ",
    "1.31.2\n",
    "\u0661.31.2",
    "v1.31.2",
    "",
    131,
]
GOOD_SOAKS = [0, 12.5, 2_592_000, "12h", "1d2h", "30d"]
BAD_SOAKS = [-1, 2_592_001, "twelve", "12", "12 h", True, [1]]
GOOD_QUANTITIES = [0, 3, "10%", "0%", "12.5%"]
BAD_QUANTITIES = [-1, "10", "%", "x%", 1.5, True, " 10%"]
GOOD_NAMES = ["c1", "prod-eu-07", "a.b_c-d"]
BAD_NAMES = ["", "-c1", "c1-", "c 1", "c/1", "c:1", "c1\n"]

STAGE = {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": 3600}
CHECK = {
    "name": "errors",
    "query": "sum(rate(http_errors_total[5m])) / sum(rate(http_requests_total[5m]))",
    "successCondition": "result < 0.01",
    "failureCondition": "result > 0.5",
    "interval": "5m",
    "phases": ["progress"],
}
VALID: dict[str, dict[str, Any]] = {
    "release_target": {"kind": "release_target", "eventId": "r1", "channel": "regular", "targets": {"1.30": V}},
    "start_rollout": {"kind": "start_rollout", "eventId": "s1", "version": V, "tracks": ["controlPlane"]},
    "operator_command": {
        "kind": "operator_command",
        "commandId": "c1",
        "action": "soak_override",
        "stage": "canary",
        "version": V,
        "soak": 3600,
    },
    "sequence_change": {
        "kind": "sequence_change",
        "commandId": "c2",
        "sequence": {
            "name": "main",
            "prometheusUrl": "http://prometheus.monitoring:9090",
            "stages": [
                {
                    **STAGE,
                    "checks": [CHECK],
                    "soakOverrides": {V: 60},
                    "rolloutStrategy": {
                        "maxUnavailable": "10%",
                        "autoPartitionSize": "25%",
                        "partitions": [{"name": "p1", "clusterGroupSelector": {"matchLabels": {"r": "e"}}}],
                    },
                }
            ],
        },
    },
    "stage_advance": {
        "kind": "stage_advance",
        "commandId": "c3",
        "rolloutId": "r-1",
        "stage": "canary",
        "track": "nodes",
        "partition": "All",
        "version": V,
        "clusters": ["c1"],
        "retries": {"c1": 1},
    },
    "upgrade_result": {
        "kind": "upgrade_result",
        "commandId": "c3",
        "cluster": "c1",
        "track": "nodes",
        "version": V,
        "outcome": "failed",
        "error": "boom",
        "finishedAt": 1.5,
    },
    "heartbeat": {
        "kind": "heartbeat",
        "cluster": "c1",
        "ready": True,
        "observedAt": 1.0,
        "controlPlaneVersion": "v1.31.0+k3s1",
        "nodeVersion": "v1.30.5-gke.1000",
    },
    "readiness": {
        "kind": "readiness",
        "cluster": "c1",
        "ready": False,
        "reason": "down",
        "observedAt": 2.0,
        "controlPlaneVersion": V,
        "nodeVersion": "1.31.2",
    },
    "inventory": {
        "kind": "inventory",
        "action": "upsert",
        "cluster": {
            "name": "c1",
            "labels": {"env": "prod"},
            "version": V,
            "nodePools": [{"name": "p", "version": "1.31.2"}],
        },
    },
    "stage_transition": {
        "kind": "stage_transition",
        "rolloutId": "r-1",
        "stage": "canary",
        "track": "nodes",
        "state": "SOAKING",
        "version": V,
        "reason": "soaking",
        "until": 5.0,
    },
    "rollout_transition": {"kind": "rollout_transition", "rolloutId": "r-1", "state": "PAUSED", "reason": "paused"},
    "command_ack": {"kind": "command_ack", "commandId": "c1", "accepted": False, "reason": "unknown rollout r-9"},
    "wait_changed": {
        "kind": "wait_changed",
        "rolloutId": "r-1",
        "stage": "canary",
        "track": "nodes",
        "waits": [{"rule": "GATE-2", "message": "waiting", "numbers": {"notReady": 2}}],
    },
    "notice": {"kind": "notice", "code": "SEQ-6", "message": "moved", "cluster": "c1", "stage": "prod"},
    "check_result": {
        "kind": "check_result",
        "rolloutId": "r-1",
        "stage": "prod",
        "check": "errors",
        "observedAt": 2.0,
        "value": 0.05,
        "outcome": "failed",
        "reason": "0.05 against result < 0.01",
    },
    "check_series": {
        "kind": "check_series",
        "rolloutId": "r-1",
        "stage": "prod",
        "check": "errors",
        "running": True,
        "since": 2.0,
        "interval": 300.0,
    },
}

# (path, values the services accept, values they refuse); a path applies to the types that have it
S0 = "sequence.stages.0"
Mutation = tuple[str, list[Any], list[Any]] | tuple[str, list[Any], list[Any], tuple[str, ...]]
MUTATIONS: list[Mutation] = [
    ("targets.1\\.30", GOOD_VERSIONS, BAD_VERSIONS),
    ("version", GOOD_VERSIONS, BAD_VERSIONS, ("start_rollout", "stage_advance", "upgrade_result", "stage_transition")),
    # an operator command with a bad version is answered, rejected with the reason (OPS-3): any text passes
    ("version", [*GOOD_VERSIONS[:2], *BAD_VERSIONS[:-1]], [BAD_VERSIONS[-1]], ("operator_command",)),
    ("cluster.version", GOOD_VERSIONS, BAD_VERSIONS),
    # what a cluster reports running: optional, and written as targets are (the monitor drops the `v`)
    ("controlPlaneVersion", [*GOOD_VERSIONS, None], BAD_VERSIONS, ("readiness",)),
    ("nodeVersion", [*GOOD_VERSIONS, None], BAD_VERSIONS, ("readiness",)),
    # what a heartbeat carries is Kubernetes' spelling, free text, bounded like a version
    (
        "controlPlaneVersion",
        ["v1.31.13-gke.1023000", "v1.29.4-eks-036c24b", "anything", "v" + "1" * 12, None],
        ["v1.31." + "9" * 5000, "v" + "1" * 13, "v1.31.1\n" + "2" * 13, "x" * 129, 131],
        ("heartbeat",),
    ),
    ("nodeVersion", ["v1.31.0+k3s1", None], ["v1.31." + "9" * 13], ("heartbeat",)),
    # not above the control plane's version: that rule is the model's alone
    ("cluster.nodePools.0.version", ["1.31.2", "1.30.5-gke.1000"], BAD_VERSIONS),
    ("cluster.name", GOOD_NAMES, BAD_NAMES),
    ("soak", [*GOOD_SOAKS, None], BAD_SOAKS),
    (f"{S0}.soak", GOOD_SOAKS, [*BAD_SOAKS, None]),
    (f"{S0}.soakOverrides.{V}", GOOD_SOAKS, BAD_SOAKS),
    (f"{S0}.rolloutStrategy.maxUnavailable", GOOD_QUANTITIES, [*BAD_QUANTITIES, None]),
    (f"{S0}.rolloutStrategy.autoPartitionSize", [1, "25%", "0.5%"], [0, "0%", "0.0%", *BAD_QUANTITIES]),
    (f"{S0}.rolloutStrategy.maxNew", [1, 50], [0, -1, "5", 1.5]),
    (
        f"{S0}.rolloutStrategy.partitions.0.clusterGroupSelector",
        [{}, {"matchLabels": {"r": "w"}}, {"clusterSelector": {"matchLabels": {"env": "prod"}}}, None],
        ["agroup", {"matchLabels": {"r": ["e"]}}],
    ),
    (
        f"{S0}.clusterSelector.matchExpressions",
        [
            [{"key": "env", "operator": "In", "values": ["a"]}],
            [{"key": "env", "operator": "Exists"}],
            [{"key": "env", "operator": "DoesNotExist", "values": []}],
        ],
        [
            [{"key": "env", "operator": "In"}],
            [{"key": "env", "operator": "In", "values": []}],
            [{"key": "env", "operator": "Exists", "values": ["a"]}],
            [{"key": "env", "operator": "Near", "values": ["a"]}],
        ],
    ),
    (f"{S0}.clusterNames", [None], [["c1"], "c1"]),
    (f"{S0}.clusterGroup", [None], ["prod"]),
    ("tracks", [["nodes"], ["controlPlane", "nodes"]], [[], ["bogus"], "nodes"]),
    ("action", ["pause", "retry"], ["stop", ""], ("operator_command",)),
    ("action", ["remove"], ["pause", ""], ("inventory",)),
    ("commandId", ["c9"], ["", None, 5]),
    ("eventId", ["e9"], ["", None]),
    ("targets", [{"1.29": V, "1.30": V}], [{}, {"1.3O": V}, {"1": V}, {"1.30.1": V}, {" 1.30": V}]),
    ("retries", [{}, {"c2": 3}], [{"c1": "x"}, {"c1": 1.5}]),
    ("outcome", ["started", "succeeded"], ["done", "passed"], ("upgrade_result",)),
    # CHK-2: the check-result event and a stage's checks; a condition's grammar (nested parentheses)
    # is beyond a JSON Schema and the services' alone (tests/checks)
    ("outcome", ["passed", "failed", "inconclusive"], ["done", "succeeded", None], ("check_result",)),
    ("value", [0, -1.5, 0.05, None], ["0.05", True]),
    ("rolloutId", ["r-2"], ["", None, 5], ("check_result",)),
    ("check", ["p99-latency"], ["", None]),
    ("reason", ["no sample"], ["", None], ("check_result",)),
    (f"{S0}.checks.0.interval", [1, 0.5, "30s", "5m", "0.5s", "1h30m"], [0, -1, "0s", "0.0m", "5", "5 m", True, None]),
    (f"{S0}.checks.0.failureLimit", [0, 3], [-1, 1.5, None]),
    (f"{S0}.checks.0.inconclusiveLimit", [0, 2], [-1, 1.5, None]),
    (f"{S0}.checks.0.phases", [["progress"], ["soak"], ["soak", "progress"]], [[], ["bake"], "soak", None]),
    (f"{S0}.checks.0.name", ["p99"], ["", None]),
    (f"{S0}.checks.0.query", ["up"], ["", None]),
    (f"{S0}.checks.0.failureCondition", [None, "result > 0.5"], ["", 1]),
    (
        "sequence.prometheusUrl",
        ["http://prometheus:9090", "https://p.example/prom/", None],
        ["prometheus:9090", "ftp://p", "http://", "http://p:9090/?q=1", " http://p", "http://p\n", "http://u:pw@p"],
    ),
    ("ready", [True, False], ["yes", None]),
    # a time within year 9999, finite (BUS-7: one far ahead made later observations older)
    ("observedAt", [0, 1.5, 253_402_300_799], ["now", 1e38, 253_402_300_800, -1]),
    ("finishedAt", [0, 1.5, None], [1e38, -1, "now"]),
    ("accepted", [True], ["no"]),
    ("kind", [], ["something_else"]),
    ("extraField", [], [1]),
]


def _models() -> dict[str, type[BaseModel]]:
    return {str(m.model_fields["kind"].default): m for t in ALL for m in t.models}


def _set(message: dict[str, Any], path: str, value: Any) -> bool:
    """Set the field at `path` (dots; `\\.` inside a key); False when the message has no such place."""
    parts = [p.replace("\0", ".") for p in path.replace("\\.", "\0").split(".")]
    node: Any = message
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.get(part)
        if not isinstance(node, dict | list):
            return False
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
        return True
    if last not in node and last not in ("extraField", "clusterNames", "clusterGroup"):
        return False
    node[last] = value
    return True


def cases() -> Iterator[tuple[str, str, Any, bool]]:
    for kind in VALID:
        yield kind, "(as given)", None, True
        for path, good, bad, *only in MUTATIONS:
            if only and kind not in only[0]:
                continue
            for value, accepted in [*((g, True) for g in good), *((b, False) for b in bad)]:
                if _set(copy.deepcopy(VALID[kind]), path, value):
                    # a second membership rule next to clusterSelector is refused whatever its value
                    expected = accepted and not (path.endswith(("clusterNames", "clusterGroup")) and value is not None)
                    yield kind, path, value, expected


def test_every_event_type_has_a_valid_example() -> None:
    assert set(VALID) == set(_models())


@pytest.mark.parametrize(("kind", "path", "value", "accepted"), list(cases()))
def test_bus2_schema_and_model_agree(kind: str, path: str, value: Any, accepted: bool) -> None:
    model = _models()[kind]
    message = copy.deepcopy(VALID[kind])
    if path != "(as given)":
        _set(message, path, value)
    schema = event_schema(model)
    try:
        model.model_validate_json(json.dumps(message))
        model_says = True
    except ValidationError:
        model_says = False
    schema_says = jsonschema.Draft202012Validator(schema).is_valid(message)
    assert (model_says, schema_says) == (accepted, accepted), f"{kind} {path}={value!r}"


def test_bus2_every_exported_schema_declares_its_draft_and_is_a_valid_schema(tmp_path: Path) -> None:
    assert main(["schemas", "export", str(tmp_path)]) == 0
    files = sorted(tmp_path.glob("io.rollout.*.json"))
    assert len(files) == len(_models())
    for path in files:
        schema = json.loads(path.read_text())
        assert schema["$schema"] == DRAFT and schema["$id"] == path.name
        jsonschema.Draft202012Validator.check_schema(schema)


def test_bus2_a_readiness_written_before_it_carried_versions_is_still_valid() -> None:
    old = {"kind": "readiness", "cluster": "c1", "ready": True, "observedAt": 2.0}
    model = _models()["readiness"]
    assert model.model_validate_json(json.dumps(old)).model_dump(exclude_none=True) == {
        "kind": "readiness",
        "cluster": "c1",
        "ready": True,
        "observed_at": 2.0,
    }
    assert jsonschema.Draft202012Validator(event_schema(model)).is_valid(old)
