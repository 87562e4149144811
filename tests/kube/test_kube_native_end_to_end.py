"""Kubernetes-native control, end to end: `kubectl apply` of a sequence whose prod stage waits for
an approval and of a release, the rollout runs through the services (planner, two executors, health
reporter and monitor, and the bridge, all as processes on the real broker and Redis), the rollout
resource's printer columns, read through the API's table output as `kubectl get` reads them, say
where it is and that it waits for the approval; approving by patching the UpgradeApproval opens
the gate and the rollout completes; a second bridge replica stands by meanwhile."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from bridge_harness import cells, eventually, sources_on, table
from lightkube import ApiError, AsyncClient
from lightkube.resources.coordination_v1 import Lease
from rollout_crd_install import installed_rollout_crds

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.kube_bridge.resources import UpgradeSequence
from rollout_common.topics.catalog import OPERATOR_COMMANDS, RELEASE_TARGETS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_system import Pace, apply_fleet, staged_cluster_names, staged_fleet, start_system, wait_for_fleet
from service_processes import ServiceProcesses

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD, NEW = "1.30.5", "1.31.2"
STAGES = ("canary", "prod")
PACE = Pace(time_scale=3600.0, upgrade_s=0.5, max_concurrent=5, ready_after_s=0.5)
# 2 h of canary soak is 2 s here; the approval gate of prod holds the rollout until the test
# approves it, so the wait is read from the table at leisure.
SOAKS = {"canary": "2h", "prod": "1h"}
LEADER, STANDBY = "bridge-0", "bridge-1"
STANDBY_SOURCE = "rollout-kube-bridge-standby"
APPROVAL = "kube-native-1-prod-before"


async def _holder(kube: AsyncClient, namespace: str) -> str | None:
    lease = await kube.get(Lease, "rollout-kube-bridge", namespace=namespace)
    return lease.spec.holderIdentity if lease.spec else None


def _kubectl(kubeconfig: Path, namespace: str, *args: str) -> str:
    command = ["kubectl", "--kubeconfig", str(kubeconfig), "-n", namespace, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _kubectl_apply(kubeconfig: Path, namespace: str, document: dict[str, Any], folder: Path) -> None:
    path = folder / f"{document['kind']}-{document['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    _kubectl(kubeconfig, namespace, "apply", "-f", str(path))


async def test_kubectl_apply_a_sequence_and_a_release_approve_by_patch_and_the_rollout_completes(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, redis_url: str, topic_prefix: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """SEQ-7 (the applied sequence, prod gated by a `before` approval, is a change the planner
    accepts, shown as a condition), START-1 (the release starts the rollout), CHK-1 and STAT-5 (the
    rollout shown at prod waiting for the approval, the UpgradeApproval the bridge made shown
    waiting; patching it opens the gate, its status says the planner accepted it, and the rollout
    completes), and the Lease (a second bridge replica holds nothing and publishes nothing)."""
    installed_rollout_crds(kubeconfig)
    prefix = topic_prefix + "."
    fleet = staged_fleet(name="kube-native", stages=STAGES, per_stage=2, version=OLD, soak=SOAKS, max_new=2)
    fleet["simulation"] = {"upgradeDuration": {"controlPlane": "10m", "nodes": "10m"}, "readyAfter": "1m"}
    await asyncio.to_thread(
        apply_fleet, fleet, tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    services = ServiceProcesses(
        log_dir=tmp_path,
        base_env={"ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap, "ROLLOUT_REDIS_URL": redis_url,
                  "ROLLOUT_TOPIC_PREFIX": prefix, "ROLLOUT_LOG_LEVEL": "INFO"},
    )  # fmt: skip
    bridge_env = {"ROLLOUT_KUBECONFIG": str(kubeconfig), "ROLLOUT_NAMESPACE": namespace}
    try:
        clusters = staged_cluster_names(STAGES, 2)
        start_system(services, prefix=prefix, clusters=clusters, pace=PACE)
        services.start("bridge", ["rollout_adapters.kube_bridge", "run"], {**bridge_env, "ROLLOUT_IDENTITY": LEADER})
        await eventually(lambda: _leader_is(kube, namespace, LEADER), what="the first bridge leads")
        services.start(
            "standby",
            ["rollout_adapters.kube_bridge", "run"],
            {**bridge_env, "ROLLOUT_IDENTITY": STANDBY, "ROLLOUT_SOURCE": STANDBY_SOURCE},
        )
        await wait_for_fleet(redis_url, prefix, services, clusters=len(clusters))
        # The sequence as Git holds it: the same one, prod soaking 2h and gated by an approval.
        sequence = {**fleet["sequence"]}
        sequence["stages"] = [{**stage} for stage in sequence["stages"]]
        sequence["stages"][1].update(soak="2h", approval={"before": True})
        _kubectl_apply(
            kubeconfig, namespace,
            {"apiVersion": "rollout.dev/v1alpha1", "kind": "UpgradeSequence", "metadata": {"name": "fleet"},
             "spec": sequence},
            tmp_path,
        )  # fmt: skip

        async def accepted() -> Any:
            now = await kube.get(UpgradeSequence, "fleet", namespace=namespace)
            found = [c for c in (now.status or {}).get("conditions") or [] if c["status"] == "True"]
            return found[0] if found else None

        condition = await eventually(accepted, what="the planner accepted the applied sequence", timeout_s=90)
        assert (condition["type"], condition["reason"], condition["message"]) == (
            "Accepted",
            "Accepted",
            "sequence change applied",
        )
        _kubectl_apply(
            kubeconfig, namespace,
            {"apiVersion": "rollout.dev/v1alpha1", "kind": "UpgradeRelease", "metadata": {"name": "r-1-31-2"},
             "spec": {"channel": "regular", "targets": {"1.30": NEW}}},
            tmp_path,
        )  # fmt: skip
        api = f"/apis/rollout.dev/v1alpha1/namespaces/{namespace}"

        async def awaiting_approval() -> Any:
            assert not services.exited(), services.log_tail(next(iter(services.exited())))
            rows = cells(await table(kubeconfig, f"{api}/upgraderollouts"))
            return rows[0] if rows and (rows[0]["Waiting"] or "").startswith("CHK-1") else None

        row = await eventually(awaiting_approval, what="the rollout shown waiting for prod's approval", timeout_s=120)
        assert (row["Name"], row["Version"], row["Stage"], row["State"]) == ("kube-native-1", NEW, "prod", "RUNNING")
        assert row["Waiting"].startswith(
            "CHK-1: the version reached the stage; it starts once approved: the before approval of stage prod, "
            "waiting since "
        )

        async def approval_row() -> Any:
            rows = cells(await table(kubeconfig, f"{api}/upgradeapprovals"))
            return rows[0] if rows and rows[0]["Accepted"] else None

        shown = await eventually(approval_row, what="the approval the bridge made, shown waiting")
        assert {k: shown[k] for k in ("Name", "Rollout", "Stage", "Gate", "Approved", "Accepted", "Reason")} == {
            "Name": APPROVAL, "Rollout": "kube-native-1", "Stage": "prod", "Gate": "before", "Approved": None,
            "Accepted": "Unknown", "Reason": "the gate waits: set spec.approved to true (and approvedBy) to open it",
        }  # fmt: skip
        approve = '{"spec":{"approved":true,"approvedBy":"alice","comment":"canary looked fine"}}'
        patched = _kubectl(
            kubeconfig, namespace, "patch", "upgradeapproval", APPROVAL, "--type", "merge", "-p", approve
        )
        assert patched == f"upgradeapproval.rollout.dev/{APPROVAL} patched"

        async def answered() -> Any:
            rows = cells(await table(kubeconfig, f"{api}/upgradeapprovals"))
            return rows[0] if rows and rows[0]["Accepted"] == "True" else None

        opened = await eventually(answered, what="the planner's acceptance of the approval in its status")
        assert (opened["Approved"], opened["Reason"]) == (
            True,
            "the before gate of stage prod approved by alice for kube-native-1",
        )

        async def completed() -> Any:
            rows = cells(await table(kubeconfig, f"{api}/upgraderollouts"))
            return rows[0] if rows and rows[0]["State"] == "COMPLETED" else None

        done = await eventually(completed, what="the rollout shown completed", timeout_s=120)
        assert (done["Stage"], done["Version"], done["Waiting"] or "") == ("prod", NEW, "")
        # The standby ran all along, held no Lease and published nothing: every event came from the leader.
        assert await _holder(kube, namespace) == LEADER
        assert "standby" not in services.exited()
        bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}reader")
        try:
            sources = [*await sources_on(bus, OPERATOR_COMMANDS, prefix=prefix)]
            sources += await sources_on(bus, RELEASE_TARGETS, prefix=prefix)
        finally:
            await bus.close()
        assert sources.count("rollout-kube-bridge") == 3  # the sequence, the approval, the release
        assert STANDBY_SOURCE not in sources
        assert "leading" not in services.log_tail("standby", chars=100_000)
    finally:
        services.stop_all()


async def _leader_is(kube: AsyncClient, namespace: str, identity: str) -> bool | None:
    try:
        return True if await _holder(kube, namespace) == identity else None
    except ApiError:
        return None  # no Lease yet
