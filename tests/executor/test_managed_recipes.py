"""The command driver's recipes for managed fleets (deploy/recipes: GKE, AKS, EKS), run through the
real CommandDriver against stand-in CLIs (cloud_standin) that record every argv: the exact cloud
commands each track runs, nothing but look-ups when the cluster is already there (idempotent),
and the cloud's refusal carried as the failed outcome's error."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from rollout_common.status import Track
from rollout_executor.drivers.command import CommandDriver
from rollout_executor.drivers.port import DriverOutcome
from rollout_executor.settings import CommandDriverSettings
from rollout_executor.target import UpgradeTarget

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("cloud_standin.py")


class Cloud:
    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, *, master: str, pools: dict[str, str]) -> None:
        self.record = folder / "argv.jsonl"
        self.state = folder / "state.json"
        self.state.write_text(json.dumps({"master": master, "pools": pools}))
        bin_dir = folder / "bin"
        bin_dir.mkdir()
        for tool in ("gcloud", "az", "aws"):
            shim = bin_dir / tool
            shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$0" "$@"\n')
            shim.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("STANDIN_RECORD", str(self.record))
        monkeypatch.setenv("STANDIN_STATE", str(self.state))

    def calls(self) -> list[list[str]]:
        if not self.record.exists():
            return []
        lines = self.record.read_text().splitlines()
        self.record.unlink()
        return [json.loads(line) for line in lines]

    def versions(self) -> tuple[str, dict[str, str]]:
        state = json.loads(self.state.read_text())
        return state["master"], state["pools"]


async def run(recipe: str, track: Track, version: str, cluster: str = "eu-1") -> DriverOutcome:
    driver = CommandDriver(CommandDriverSettings(executable=str(REPO / "deploy" / "recipes" / recipe), timeout_s=60))
    return await driver.upgrade(UpgradeTarget(cluster, track, version), fencing_token=1)


async def test_gke_master_then_each_node_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v = "1.31.13-gke.1023000"
    cloud = Cloud(
        tmp_path, monkeypatch, master="1.30.5-gke.100", pools={"default": "1.30.5-gke.100", "gpu": "1.30.5-gke.100"}
    )
    monkeypatch.setenv("ROLLOUT_GKE_LOCATION", "europe-west1")
    where = ["--location", "europe-west1"]
    # Nodes may not pass the master: the cloud's refusal is the outcome's error.
    refused = await run("gke-upgrade.sh", Track.NODES, v)
    assert not refused.succeeded and refused.error is not None
    assert f"ERROR: node version {v} must match the master version 1.30.5-gke.100" in refused.error
    cloud.calls()
    assert await run("gke-upgrade.sh", Track.CONTROL_PLANE, v) == DriverOutcome(succeeded=True)
    assert cloud.calls() == [
        ["gcloud", "container", "clusters", "describe", "eu-1", *where, "--format", "value(currentMasterVersion)"],
        ["gcloud", "container", "clusters", "upgrade", "eu-1", *where, "--master", "--cluster-version", v, "--quiet"],
    ]
    assert await run("gke-upgrade.sh", Track.NODES, v) == DriverOutcome(succeeded=True)
    upgrades = [c for c in cloud.calls() if "upgrade" in c]
    assert upgrades == [
        [
            "gcloud",
            "container",
            "clusters",
            "upgrade",
            "eu-1",
            *where,
            "--node-pool",
            pool,
            "--cluster-version",
            v,
            "--quiet",
        ]
        for pool in ("default", "gpu")
    ]
    assert cloud.versions() == (v, {"default": v, "gpu": v})
    # Again: only look-ups.
    assert await run("gke-upgrade.sh", Track.CONTROL_PLANE, v) == DriverOutcome(succeeded=True)
    assert await run("gke-upgrade.sh", Track.NODES, v) == DriverOutcome(succeeded=True)
    assert [c for c in cloud.calls() if "upgrade" in c] == []


async def test_aks_control_plane_only_then_each_node_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cloud = Cloud(tmp_path, monkeypatch, master="1.30.2", pools={"system": "1.30.2", "user": "1.30.2"})
    monkeypatch.setenv("ROLLOUT_AKS_RESOURCE_GROUP", "fleet-rg")
    rg = ["--resource-group", "fleet-rg"]
    assert await run("aks-upgrade.sh", Track.CONTROL_PLANE, "1.31.2") == DriverOutcome(succeeded=True)
    assert cloud.calls() == [
        ["az", "aks", "show", *rg, "--name", "eu-1", "--query", "kubernetesVersion", "--output", "tsv"],
        [
            "az",
            "aks",
            "upgrade",
            *rg,
            "--name",
            "eu-1",
            "--kubernetes-version",
            "1.31.2",
            "--control-plane-only",
            "--yes",
        ],
    ]
    assert await run("aks-upgrade.sh", Track.NODES, "1.31.2") == DriverOutcome(succeeded=True)
    assert [c for c in cloud.calls() if c[2:4] == ["nodepool", "upgrade"]] == [
        [
            "az",
            "aks",
            "nodepool",
            "upgrade",
            *rg,
            "--cluster-name",
            "eu-1",
            "--name",
            pool,
            "--kubernetes-version",
            "1.31.2",
        ]
        for pool in ("system", "user")
    ]
    assert cloud.versions() == ("1.31.2", {"system": "1.31.2", "user": "1.31.2"})
    assert await run("aks-upgrade.sh", Track.NODES, "1.31.2") == DriverOutcome(succeeded=True)
    assert [c for c in cloud.calls() if "upgrade" in c] == []


async def test_eks_minor_version_and_waits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cloud = Cloud(tmp_path, monkeypatch, master="1.30", pools={"ng-a": "1.30", "ng-b": "1.30"})
    assert await run("eks-upgrade.sh", Track.CONTROL_PLANE, "1.31.2") == DriverOutcome(succeeded=True)
    assert cloud.calls() == [
        ["aws", "eks", "describe-cluster", "--name", "eu-1", "--query", "cluster.version", "--output", "text"],
        ["aws", "eks", "update-cluster-version", "--name", "eu-1", "--kubernetes-version", "1.31"],
        ["aws", "eks", "wait", "cluster-active", "--name", "eu-1"],
    ]
    assert await run("eks-upgrade.sh", Track.NODES, "1.31.2") == DriverOutcome(succeeded=True)
    calls = [c for c in cloud.calls() if c[2] in ("update-nodegroup-version", "wait")]
    assert calls == [
        call
        for group in ("ng-a", "ng-b")
        for call in (
            ["aws", "eks", "update-nodegroup-version", "--cluster-name", "eu-1", "--nodegroup-name", group,
             "--kubernetes-version", "1.31"],
            ["aws", "eks", "wait", "nodegroup-active", "--cluster-name", "eu-1", "--nodegroup-name", group],
        )
    ]  # fmt: skip
    assert await run("eks-upgrade.sh", Track.CONTROL_PLANE, "1.31.2") == DriverOutcome(succeeded=True)
    assert [c for c in cloud.calls() if "update-cluster-version" in c] == []
