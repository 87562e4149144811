"""rollout's own CRDs (group rollout.dev) on the real apiserver: generated from the models (the
committed file is what the generator writes), installed, a valid object of each kind accepted, and
invalid ones refused by the apiserver itself with the CEL rule's message."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import GenericNamespacedResource
from lightkube.types import PatchType
from pydantic import ValidationError
from rollout_crd_install import CRD_FILE, installed_rollout_crds

from rollout_adapters.kube_bridge.crd_yaml import crds_yaml
from rollout_adapters.kube_bridge.models import ReleaseSpec
from rollout_adapters.kube_bridge.resources import UpgradeApproval, UpgradeRelease, UpgradeRollout, UpgradeSequence
from rollout_common.sequence import Sequence

ON_THE_APISERVER = pytest.mark.asyncio(loop_scope="session")

SEQUENCE: dict[str, Any] = {
    "name": "main",
    "channel": "stable",
    "stages": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"},
        {
            "name": "prod",
            "clusterSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
            "soak": 3600,
            "soakOverrides": {"1.31.2": "2d"},
            "rolloutStrategy": {"maxUnavailable": "10%", "autoPartitionSize": 5, "maxFailures": 2},
        },
    ],
}


def test_committed_crds_are_what_the_models_generate() -> None:
    """The chart's CRD file is the generator's output: a model change without regenerating fails here."""
    assert CRD_FILE.read_text() == crds_yaml(), (
        "regenerate: python -m rollout_adapters.kube_bridge crds > deploy/helm/rollout/crds/rollout.dev.yaml"
    )


def test_the_example_sequence_is_valid_for_the_model_too() -> None:
    """SEQ-1..5: the document the apiserver accepts below is one `rollout apply` accepts."""
    assert [stage.name for stage in Sequence.model_validate(SEQUENCE).stages] == ["canary", "prod"]


async def _create(kube: AsyncClient, kind: type[GenericNamespacedResource], namespace: str, spec: Any) -> Any:
    name = f"x-{uuid.uuid4().hex[:8]}"
    obj = kind(metadata={"name": name, "namespace": namespace}, spec=spec)
    return await kube.create(obj)


async def _refusal(kube: AsyncClient, kind: type[GenericNamespacedResource], namespace: str, spec: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await _create(kube, kind, namespace, spec)
    assert caught.value.status.code == 422, caught.value.status
    return str(caught.value.status.message)


@ON_THE_APISERVER
async def test_crds_install_and_valid_objects_are_accepted(kube: AsyncClient, kubeconfig: Path, namespace: str) -> None:
    names = installed_rollout_crds(kubeconfig)
    assert names == [
        "upgradesequences.rollout.dev",
        "upgradereleases.rollout.dev",
        "upgraderollouts.rollout.dev",
        "upgradeapprovals.rollout.dev",
    ]
    sequence = await _create(kube, UpgradeSequence, namespace, SEQUENCE)
    assert sequence.spec["stages"][1]["soakOverrides"] == {"1.31.2": "2d"}
    release = await _create(kube, UpgradeRelease, namespace, {"channel": "stable", "targets": {"1.30": "1.31.2"}})
    assert release.metadata.generation == 1
    on_demand = await _create(kube, UpgradeRelease, namespace, {"version": "1.31.2", "tracks": ["controlPlane"]})
    assert on_demand.spec == {"version": "1.31.2", "tracks": ["controlPlane"]}
    rollout = await _create(kube, UpgradeRollout, namespace, {"rolloutId": "r-1", "paused": True})
    assert rollout.spec == {"rolloutId": "r-1", "paused": True}
    approval = await _create(kube, UpgradeApproval, namespace, {"rolloutId": "r-1", "stage": "prod", "gate": "before"})
    assert approval.spec == {"rolloutId": "r-1", "stage": "prod", "gate": "before"}


def _with_stage(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(SEQUENCE)
    document["stages"][0].update(changes)
    return document


@ON_THE_APISERVER
@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            _with_stage(clusterNames=["a"]),
            "a stage selects its clusters with exactly one of clusterSelector, clusterNames, clusterGroup (SEQ-5)",
        ),
        (
            _with_stage(clusterSelector=None, clusterGroup=None),
            "a stage selects its clusters with exactly one of clusterSelector, clusterNames, clusterGroup (SEQ-5)",
        ),
        (_with_stage(name="prod"), "every stage name is used once (SEQ-1)"),
        ({**SEQUENCE, "maxStages": 1}, "the stages exceed maxStages (SEQ-4)"),
        (_with_stage(soak="3 days"), "must be a soak from 0d to 30d inclusive (SOAK-3)"),
        (_with_stage(soak=2592001), "must be a soak from 0d to 30d inclusive (SOAK-3)"),
        (
            _with_stage(clusterSelector={"matchExpressions": [{"key": "env", "operator": "Exists", "values": ["x"]}]}),
            "operators In and NotIn need values, Exists and DoesNotExist take none",
        ),
        (
            _with_stage(rolloutStrategy={"maxUnavailable": "ten"}),
            "must be a count of clusters (integer >= 0) or a percentage such as '10%'",
        ),
        (
            _with_stage(rolloutStrategy={"autoPartitionSize": "0%"}),
            "must be a count of clusters (integer >= 1) or a percentage above 0 such as '25%'",
        ),
        (
            _with_stage(soakOverrides={"1.31": "1d"}),
            r"every key must match ^[0-9]{1,12}\.[0-9]{1,12}\.[0-9]{1,12}(-gke\.[0-9]{1,12})?$",
        ),
    ],
)
async def test_invalid_sequences_are_refused_with_the_rule_message(
    kube: AsyncClient, kubeconfig: Path, namespace: str, document: dict[str, Any], message: str
) -> None:
    """The apiserver refuses what the model refuses, with the CEL rule's words (SEQ-1, SEQ-4, SEQ-5, SOAK-3)."""
    installed_rollout_crds(kubeconfig)
    with pytest.raises(ValidationError):
        Sequence.model_validate({k: v for k, v in document.items()})
    assert message in await _refusal(kube, UpgradeSequence, namespace, document)


@ON_THE_APISERVER
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"channel": "stable", "targets": {"1.30": "1.31.2"}, "version": "1.31.2"},
            "a release is either channel and targets (START-1) or an on-demand version (START-2)",
        ),
        ({"channel": "stable"}, "a release is either channel and targets (START-1) or an on-demand version (START-2)"),
        (
            {"channel": "stable", "targets": {"1.30": "1.31.2"}, "tracks": ["nodes"]},
            "tracks belong to an on-demand version",
        ),
        ({"channel": "stable", "targets": {"1.30.1": "1.31.2"}}, r"every key must match ^[0-9]{1,12}\.[0-9]{1,12}$"),
    ],
)
async def test_invalid_releases_are_refused_with_the_rule_message(
    kube: AsyncClient, kubeconfig: Path, namespace: str, spec: dict[str, Any], message: str
) -> None:
    """START-1 / START-2: one kind of release per object, refused by the apiserver otherwise."""
    installed_rollout_crds(kubeconfig)
    assert message in await _refusal(kube, UpgradeRelease, namespace, spec)


def test_release_spec_model_reads_both_kinds() -> None:
    assert ReleaseSpec.model_validate({"channel": "stable", "targets": {"1.30": "1.31.2"}}).targets == {
        "1.30": "1.31.2"
    }


async def _patch_refusal(kube: AsyncClient, kind: type[GenericNamespacedResource], obj: Any, spec: Any) -> str:
    with pytest.raises(ApiError) as caught:
        await kube.patch(
            kind, obj.metadata.name, {"spec": spec}, namespace=obj.metadata.namespace, patch_type=PatchType.MERGE
        )
    assert caught.value.status.code == 422, caught.value.status
    return str(caught.value.status.message)


@ON_THE_APISERVER
async def test_transition_rules_refuse_changes_the_object_alone_forbids(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """OPS-2: a cancelled rollout stays cancelled; a release and a rollout's id are immutable."""
    installed_rollout_crds(kubeconfig)
    rollout = await _create(kube, UpgradeRollout, namespace, {"rolloutId": "r-1", "cancelled": True})
    assert "a cancelled rollout stays cancelled (OPS-2)" in await _patch_refusal(
        kube, UpgradeRollout, rollout, {"cancelled": False}
    )
    assert "rolloutId is immutable" in await _patch_refusal(kube, UpgradeRollout, rollout, {"rolloutId": "r-2"})
    release = await _create(kube, UpgradeRelease, namespace, {"channel": "stable", "targets": {"1.30": "1.31.2"}})
    assert "a release is immutable: create another one" in await _patch_refusal(
        kube, UpgradeRelease, release, {"targets": {"1.30": "1.31.3"}}
    )


@ON_THE_APISERVER
async def test_an_approval_says_who_approves_and_once_given_is_final(
    kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """CHK-1: approving names the approver; an approval given cannot be withdrawn or reworded (the
    planner cannot take it back either); the gate it is for never changes."""
    installed_rollout_crds(kubeconfig)
    approval = await _create(kube, UpgradeApproval, namespace, {"rolloutId": "r-1", "stage": "prod", "gate": "after"})
    assert "an approval says who approves (approvedBy) (CHK-1)" in await _patch_refusal(
        kube, UpgradeApproval, approval, {"approved": True}
    )
    assert "an approval names its rollout, stage and gate once" in await _patch_refusal(
        kube, UpgradeApproval, approval, {"gate": "before"}
    )
    await kube.patch(
        UpgradeApproval, approval.metadata.name, {"spec": {"approved": True, "approvedBy": "alice"}},
        namespace=namespace, patch_type=PatchType.MERGE,
    )  # fmt: skip
    final = "an approval given is final: it cannot be withdrawn or changed (CHK-1)"
    assert final in await _patch_refusal(kube, UpgradeApproval, approval, {"approved": False})
    assert final in await _patch_refusal(kube, UpgradeApproval, approval, {"comment": "on second thoughts"})
