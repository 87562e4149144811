"""rollout's own CRDs, installed once per test session into the management cluster."""

from __future__ import annotations

import functools
from pathlib import Path

from rollout_devenv.kube import install_crds

CRD_FILE = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "rollout" / "crds" / "rollout.dev.yaml"


@functools.cache
def installed_rollout_crds(kubeconfig: Path) -> list[str]:
    """Apply the CRDs (server-side) and wait until they are Established; once per kubeconfig."""
    return install_crds(kubeconfig, [CRD_FILE])
