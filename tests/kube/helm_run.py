"""The chart and the helm command the chart's tests run (built from the Go module proxy once per
machine), with its caches in a temporary folder rather than the user's home."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rollout_devenv.helm import build_helm

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "rollout"


def helm_command(home: Path) -> list[str]:
    return [
        "env",
        f"HELM_CACHE_HOME={home / 'cache'}",
        f"HELM_CONFIG_HOME={home / 'config'}",
        f"HELM_DATA_HOME={home / 'data'}",
        str(build_helm()),
    ]


def run_helm(helm: list[str], *args: str) -> str:
    done = subprocess.run([*helm, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout
