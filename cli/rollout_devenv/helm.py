"""The `helm` command, built with Go from the module `helm.sh/helm/v3` on the Go module proxy,
once per machine per version, into `~/.cache/rollout/helm-<version>/` (beside kube-apiserver).

Like the apiserver's build it takes a lock, so one build runs and a second caller waits for it;
`make test` starts it in the background (`python -m rollout_devenv helm build --background`) and
the chart's tests wait for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from rollout_devenv._proc import DevenvError, log_tail, spawn, stop_process
from rollout_devenv.build_lock import start_detached_build, took
from rollout_devenv.kafka import cache_root
from rollout_devenv.kube import find_go

HELM_MODULE = "helm.sh/helm/v3"
# The one place the version is pinned.
HELM_VERSION = "v3.22.0"
BUILD_TIMEOUT_S = 3600.0
_POLL_S = 2.0
_MARKER = ".complete"


def helm_home(version: str = HELM_VERSION) -> Path:
    return cache_root() / f"helm-{version}"


def _is_built(home: Path) -> bool:
    marker = home / _MARKER
    return (home / "helm").is_file() and marker.is_file() and marker.read_text().strip() == HELM_VERSION


def _say(text: str, *, quiet: bool) -> None:
    if not quiet:
        print(f"rollout_devenv: {text}", file=sys.stderr, flush=True)


def build_helm(*, quiet: bool = False, wait_s: float = BUILD_TIMEOUT_S) -> Path:
    """The helm binary, built unless this machine has it (a few minutes; at the lowest CPU
    priority). A build under way elsewhere is waited for, up to `wait_s`."""
    home = helm_home()
    if _is_built(home):
        return home / "helm"
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        started = time.monotonic()
        said = False
        while not took(lock):
            if not said:
                _say(f"waiting for the helm build under way (log: {home / 'build.log'})", quiet=quiet)
                said = True
            if time.monotonic() - started > wait_s:
                raise DevenvError(
                    f"the helm build under way did not finish within {wait_s:.0f} s; see {home / 'build.log'}",
                    detail=log_tail(home / "build.log"),
                )
            time.sleep(_POLL_S)
        if not _is_built(home):
            _run_build(home, quiet=quiet)
    return home / "helm"


def _run_build(home: Path, *, quiet: bool) -> None:
    _say(f"building helm {HELM_VERSION} with Go into {home} (once per machine)...", quiet=quiet)
    started = time.monotonic()
    log_path = home / "build.log"
    bin_dir = home / "partial"
    # `go install` of a module version needs no go.mod of ours: the module's own is used.
    cmd = ["nice", "-n", "19", str(find_go()), "install", "-trimpath", "-ldflags", "-s -w"]
    cmd += [f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"]
    env = {**os.environ, "GOBIN": str(bin_dir), "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    proc = spawn(cmd, log_path=log_path, cwd=home, env=env)
    try:
        code = proc.wait(timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise DevenvError(f"building helm took over {BUILD_TIMEOUT_S:.0f} s; see {log_path}") from None
    finally:
        stop_process(proc, grace_s=2.0)
    if code != 0:
        raise DevenvError(f"go install of helm failed (exit {code}); see {log_path}", detail=log_tail(log_path))
    (bin_dir / "helm").rename(home / "helm")
    (home / _MARKER).write_text(HELM_VERSION + "\n")
    _say(f"built helm in {time.monotonic() - started:.0f} s", quiet=quiet)


def start_background_build() -> str:
    """Start building helm in a detached process unless it is built or being built."""
    home = helm_home()
    if _is_built(home):
        return f"helm {HELM_VERSION} is built: {home / 'helm'}"
    if not start_detached_build(home, command="helm", what="helm"):
        return f"helm {HELM_VERSION} is being built (log: {home / 'build.log'})"
    return f"building helm {HELM_VERSION} in the background (log: {home / 'build.log'}); the chart's tests wait for it"
