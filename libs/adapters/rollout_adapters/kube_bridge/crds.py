"""The CustomResourceDefinitions of rollout's own resources, generated from the pydantic models.

`python -m rollout_adapters.kube_bridge crds` prints them; the chart's `crds/` folder holds that
output, and a test regenerates it and compares, so the schemas cannot drift from the models.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel

from rollout_adapters.kube_bridge.models import ApprovalSpec, PublishedStatus, ReleaseSpec, RolloutSpec, RolloutStatus
from rollout_adapters.kube_bridge.structural import Rule, structural
from rollout_common.sequence import Sequence

GROUP: Final = "rollout.dev"
VERSION: Final = "v1alpha1"
CATEGORY: Final = "rollout"

# What the models' `oneOf` and `if/then/else` say, as CEL on the object alone.
SEQUENCE_RULES: Final[dict[str, list[Rule]]] = {
    "Stage": [
        {
            "rule": "[has(self.clusterSelector), has(self.clusterNames), has(self.clusterGroup)]"
            ".filter(x, x).size() == 1",
            "message": "a stage selects its clusters with exactly one of clusterSelector, clusterNames, "
            "clusterGroup (SEQ-5)",
        }
    ],
    "Requirement": [
        {
            "rule": "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) "
            ": (!has(self.values) || size(self.values) == 0)",
            "message": "operators In and NotIn need values, Exists and DoesNotExist take none",
        }
    ],
    "Sequence": [
        {
            "rule": "self.stages.all(s, self.stages.exists_one(t, t.name == s.name))",
            "message": "every stage name is used once (SEQ-1)",
        },
        {
            "rule": "!has(self.maxStages) || size(self.stages) <= self.maxStages",
            "message": "the stages exceed maxStages (SEQ-4)",
        },
    ],
}
RELEASE_RULES: Final[list[Rule]] = [
    {
        "rule": "has(self.channel) == has(self.targets) && has(self.targets) != has(self.version)",
        "message": "a release is either channel and targets (START-1) or an on-demand version (START-2)",
    },
    {"rule": "!has(self.tracks) || has(self.version)", "message": "tracks belong to an on-demand version"},
]
ROLLOUT_RULES: Final[list[Rule]] = [
    {"rule": "self.rolloutId == oldSelf.rolloutId", "message": "rolloutId is immutable"},
    {
        "rule": "!has(oldSelf.cancelled) || !oldSelf.cancelled || (has(self.cancelled) && self.cancelled)",
        "message": "a cancelled rollout stays cancelled (OPS-2)",
    },
]
APPROVAL_RULES: Final[list[Rule]] = [
    {
        "rule": "self.rolloutId == oldSelf.rolloutId && self.stage == oldSelf.stage && self.gate == oldSelf.gate",
        "message": "an approval names its rollout, stage and gate once",
    },
    {
        "rule": "!has(self.approved) || !self.approved || has(self.approvedBy)",
        "message": "an approval says who approves (approvedBy) (CHK-1)",
    },
    {
        "rule": "!has(oldSelf.approved) || !oldSelf.approved || self == oldSelf",
        "message": "an approval given is final: it cannot be withdrawn or changed (CHK-1)",
    },
]
# Bounds the CEL cost estimate needs: lists and names of a sequence are small.
MAX_STAGES: Final = 64
MAX_NAME: Final = 253


def _schema(model: type[BaseModel], *, rules: dict[str, list[Rule]] | None = None) -> dict[str, Any]:
    return structural(model.model_json_schema(by_alias=True), rules=rules)


def _bounded_sequence() -> dict[str, Any]:
    spec = _schema(Sequence, rules=SEQUENCE_RULES)
    spec["properties"]["stages"]["maxItems"] = MAX_STAGES
    spec["properties"]["stages"]["items"]["properties"]["name"]["maxLength"] = MAX_NAME
    return spec


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _version(
    *, spec: dict[str, Any], status: dict[str, Any], columns: list[dict[str, Any]], required_spec: bool = True
) -> dict[str, Any]:
    root: dict[str, Any] = {"type": "object", "properties": {"spec": spec, "status": status}}
    if required_spec:
        root["required"] = ["spec"]
    return {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": root},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [*columns, _AGE],
    }


def _crd(*, kind: str, plural: str, short: str, version: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "rollout"}},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
                "categories": [CATEGORY],
            },
            "versions": [version],
        },
    }


_ACCEPTED = {"name": "Accepted", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Accepted')].status"}
_REASON = {"name": "Reason", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Accepted')].message"}


def sequence_crd() -> dict[str, Any]:
    columns = [
        {"name": "Channel", "type": "string", "jsonPath": ".spec.channel"},
        _ACCEPTED,
        _REASON,
    ]
    status = _schema(PublishedStatus)
    version = _version(spec=_bounded_sequence(), status=status, columns=columns)
    return _crd(kind="UpgradeSequence", plural="upgradesequences", short="useq", version=version)


def release_crd() -> dict[str, Any]:
    spec = _schema(ReleaseSpec)
    # A release is one event: a changed spec would be a second release under the same name.
    spec["x-kubernetes-validations"] = [
        *RELEASE_RULES,
        {"rule": "self == oldSelf", "message": "a release is immutable: create another one"},
    ]
    columns = [
        {"name": "Channel", "type": "string", "jsonPath": ".spec.channel"},
        {"name": "Version", "type": "string", "jsonPath": ".spec.version"},
        {"name": "Published", "type": "integer", "jsonPath": ".status.publishedGeneration"},
    ]
    version = _version(spec=spec, status=_schema(PublishedStatus), columns=columns)
    return _crd(kind="UpgradeRelease", plural="upgradereleases", short="urel", version=version)


def rollout_crd() -> dict[str, Any]:
    spec = _schema(RolloutSpec)
    spec["x-kubernetes-validations"] = ROLLOUT_RULES
    columns = [
        {"name": "Version", "type": "string", "jsonPath": ".status.version"},
        {"name": "Stage", "type": "string", "jsonPath": ".status.stage"},
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Waiting", "type": "string", "jsonPath": ".status.waiting"},
    ]
    version = _version(spec=spec, status=_schema(RolloutStatus), columns=columns)
    return _crd(kind="UpgradeRollout", plural="upgraderollouts", short="uro", version=version)


def approval_crd() -> dict[str, Any]:
    spec = _schema(ApprovalSpec)
    spec["x-kubernetes-validations"] = APPROVAL_RULES
    columns = [
        {"name": "Rollout", "type": "string", "jsonPath": ".spec.rolloutId"},
        {"name": "Stage", "type": "string", "jsonPath": ".spec.stage"},
        {"name": "Gate", "type": "string", "jsonPath": ".spec.gate"},
        {"name": "Approved", "type": "boolean", "jsonPath": ".spec.approved"},
        _ACCEPTED,
        _REASON,
    ]
    version = _version(spec=spec, status=_schema(PublishedStatus), columns=columns)
    return _crd(kind="UpgradeApproval", plural="upgradeapprovals", short="uap", version=version)


def all_crds() -> list[dict[str, Any]]:
    return [sequence_crd(), release_crd(), rollout_crd(), approval_crd()]
