"""Who may approve a gate (CHK-1) is decided by the apiserver: the local one authorizes with RBAC,
and `kubectl --as` impersonates a user (the admin, in system:masters, may). Bound in the namespace
to the chart's approver ClusterRole a user approves; without it the apiserver refuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from bridge_harness import eventually, merge_patch_as
from helm_run import CHART, run_helm
from lightkube import AsyncClient
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.rbac_authorization_v1 import ClusterRole, Role, RoleBinding
from rollout_crd_install import installed_rollout_crds

from rollout_adapters.kube_bridge.resources import UpgradeApproval

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

RBAC_GROUP = "rbac.authorization.k8s.io"
SPEC = {"rolloutId": "main-1", "stage": "prod", "gate": "before"}


def _approver_rules(helm: list[str], namespace: str) -> list[dict[str, Any]]:
    rendered = run_helm(
        helm, "template", "rel", str(CHART), "--namespace", namespace, "--show-only", "templates/bridge.yaml"
    )
    for doc in yaml.safe_load_all(rendered):
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "rel-approver":
            return list(doc["rules"])
    raise AssertionError("the chart renders no ClusterRole rel-approver")


async def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = ["kubectl", "--kubeconfig", str(kubeconfig), *args]
    return await asyncio.to_thread(
        subprocess.run, command, input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


async def test_only_a_user_bound_to_the_approver_role_may_approve(
    helm: list[str], kube: AsyncClient, kubeconfig: Path, namespace: str
) -> None:
    """CHK-1 with RBAC: bob, who may only read approvals, is refused the patch that approves; alice, bound to
    the chart's `<release>-approver` in the namespace, approves; she may not make an approval of
    her own, write an approval's status (the bridge's), or read approvals beyond the namespace."""
    installed_rollout_crds(kubeconfig)
    role = f"{namespace}-approver"  # a ClusterRole is cluster-wide: one per test
    await kube.create(
        ClusterRole(metadata=ObjectMeta(name=role), rules=[PolicyRule(**r) for r in _approver_rules(helm, namespace)])
    )
    await kube.create(
        RoleBinding(
            metadata=ObjectMeta(name="approvers", namespace=namespace),
            roleRef=RoleRef(apiGroup=RBAC_GROUP, kind="ClusterRole", name=role),
            subjects=[Subject(kind="User", name="alice", apiGroup=RBAC_GROUP)],
        )
    )
    # bob may read approvals (kubectl patch reads the object first), not approve them
    reader = ObjectMeta(name="approval-readers", namespace=namespace)
    read = PolicyRule(apiGroups=["rollout.dev"], resources=["upgradeapprovals"], verbs=["get", "list", "watch"])
    await kube.create(Role(metadata=reader, rules=[read]))
    await kube.create(
        RoleBinding(
            metadata=reader,
            roleRef=RoleRef(apiGroup=RBAC_GROUP, kind="Role", name="approval-readers"),
            subjects=[Subject(kind="User", name="bob", apiGroup=RBAC_GROUP)],
        )
    )
    await kube.create(UpgradeApproval(metadata={"name": "main-1-prod-before", "namespace": namespace}, spec=SPEC))
    ns = ["-n", namespace]

    def approve(user: str) -> list[str]:
        body = json.dumps({"spec": {"approved": True, "approvedBy": user}})
        return ["--as", user, *ns, "patch", "upgradeapproval", "main-1-prod-before", "--type", "merge", "-p", body]

    refused = await _kubectl(kubeconfig, *approve("bob"))
    assert refused.returncode == 1
    assert (
        f'User "bob" cannot patch resource "upgradeapprovals" in API group "rollout.dev" in the namespace "{namespace}"'
    ) in refused.stderr
    assert (await kube.get(UpgradeApproval, "main-1-prod-before", namespace=namespace)).spec == SPEC

    done = await _kubectl(kubeconfig, *approve("alice"))
    assert (done.returncode, done.stdout.strip()) == (0, "upgradeapproval.rollout.dev/main-1-prod-before patched")
    approved = await kube.get(UpgradeApproval, "main-1-prod-before", namespace=namespace)
    assert approved.spec == {**SPEC, "approved": True, "approvedBy": "alice"}

    own = {"apiVersion": "rollout.dev/v1alpha1", "kind": "UpgradeApproval", "metadata": {"name": "early"}, "spec": SPEC}
    made = await _kubectl(kubeconfig, "--as", "alice", *ns, "create", "-f", "-", stdin=json.dumps(own))
    assert made.returncode == 1
    assert 'User "alice" cannot create resource "upgradeapprovals"' in made.stderr
    path = f"/apis/rollout.dev/v1alpha1/namespaces/{namespace}/upgradeapprovals/main-1-prod-before/status"
    written = await merge_patch_as(kubeconfig, path, {"status": {"publishedGeneration": 9}}, user="alice")
    assert written.status_code == 403
    assert 'User "alice" cannot patch resource "upgradeapprovals/status"' in written.json()["message"]
    listed = await _kubectl(kubeconfig, "--as", "alice", "get", "upgradeapprovals", "--all-namespaces")
    assert listed.returncode == 1
    assert 'User "alice" cannot list resource "upgradeapprovals" in API group "rollout.dev" at the cluster scope' in (
        listed.stderr
    )


async def _approval(kube: AsyncClient, namespace: str, name: str, stage: str) -> None:
    spec = {"rolloutId": "main-1", "stage": stage, "gate": "before"}
    await kube.create(UpgradeApproval(metadata={"name": name, "namespace": namespace}, spec=spec))


async def test_the_chart_policy_lets_only_a_stage_s_groups_approve_it_as_themselves(
    helm: list[str], kube: AsyncClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    """CHK-1 per stage, which RBAC cannot say: with approvals.stageGroups {prod: [sre-leads]} and
    approvals.approverIsUser, the chart's admission policy refuses alice (an approver, not in
    sre-leads) approving prod but lets her approve canary; carol, in sre-leads, approves prod,
    as herself only."""
    installed_rollout_crds(kubeconfig)
    rendered = run_helm(
        helm, "template", "pol", str(CHART), "--namespace", namespace, "--show-only", "templates/approvals.yaml",
        "--set-json", 'approvals.stageGroups={"prod":["sre-leads"]}', "--set", "approvals.approverIsUser=true",
    )  # fmt: skip
    policy = tmp_path / "approvals-policy.yaml"
    policy.write_text(rendered)
    try:
        await _kubectl(kubeconfig, "apply", "-f", str(policy))
        role = f"{namespace}-approver"
        rules = [PolicyRule(**r) for r in _approver_rules(helm, namespace)]
        await kube.create(ClusterRole(metadata=ObjectMeta(name=role), rules=rules))
        await kube.create(
            RoleBinding(
                metadata=ObjectMeta(name="approvers", namespace=namespace),
                roleRef=RoleRef(apiGroup=RBAC_GROUP, kind="ClusterRole", name=role),
                subjects=[Subject(kind="User", name=n, apiGroup=RBAC_GROUP) for n in ("alice", "carol")],
            )
        )
        ns = ["-n", namespace]

        async def approve(name: str, user: str, *, approved_by: str, groups: tuple[str, ...] = ()) -> Any:
            body = json.dumps({"spec": {"approved": True, "approvedBy": approved_by}})
            as_groups = [f"--as-group={g}" for g in groups]
            return await _kubectl(
                kubeconfig, "--as", user, *as_groups, *ns, "patch", "upgradeapproval", name, "--type", "merge",
                "-p", body,
            )  # fmt: skip

        # The apiserver loads a new policy within moments: until then a fresh approval goes through.
        tries = iter(range(1000))

        async def refused_for_alice() -> Any:
            name = f"prod-{next(tries)}"
            await _approval(kube, namespace, name, "prod")
            done = await approve(name, "alice", approved_by="alice")
            return done if done.returncode else None

        refused = await eventually(refused_for_alice, what="the admission policy refuses alice approving prod")
        assert "stage prod is approved only by members of sre-leads (CHK-1)" in refused.stderr
        await _approval(kube, namespace, "main-1-prod-before", "prod")
        await _approval(kube, namespace, "main-1-canary-before", "canary")
        forged = await approve("main-1-prod-before", "carol", approved_by="the cab", groups=("sre-leads",))
        assert forged.returncode == 1
        assert "approvedBy must be your user name, carol (CHK-1)" in forged.stderr
        carol = await approve("main-1-prod-before", "carol", approved_by="carol", groups=("sre-leads",))
        assert (carol.returncode, carol.stdout.strip()) == (0, "upgradeapproval.rollout.dev/main-1-prod-before patched")
        alice = await approve("main-1-canary-before", "alice", approved_by="alice")
        assert (alice.returncode, alice.stderr) == (0, "")
    finally:
        # The policy is cluster-wide (bound to this namespace only), removed with the test.
        await _kubectl(kubeconfig, "delete", "--ignore-not-found", "-f", str(policy))
