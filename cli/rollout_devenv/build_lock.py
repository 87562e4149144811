"""The lock that lets one process on the machine build a tool (kube-apiserver, helm) while the
others wait for it, and the build started in the background under that lock."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path
from typing import IO

from rollout_devenv._proc import DevenvError

# the build runs from the checkout, where `python -m rollout_devenv` finds its package
_REPO_ROOT = Path(__file__).resolve().parents[2]


def took(lock: IO[str]) -> bool:
    """Take the build lock if no other process holds it."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def start_detached_build(home: Path, *, command: str, what: str) -> bool:
    """Start `python -m rollout_devenv <command> build` detached, logging to `background.log` in
    `home`; False, starting nothing, while another process holds the lock (a build is under way)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        if not took(lock):
            return False
    # The lock is free again the moment it is closed: the child takes it for the whole build, and a
    # waiter arriving in between takes it first and builds (the child then finds the binary).
    # `setsid -f` forks it into a session of its own and returns: the build outlives this command.
    with (home / "background.log").open("ab") as log:
        try:
            subprocess.run(
                ["setsid", "-f", sys.executable, "-m", "rollout_devenv", command, "build"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=_REPO_ROOT,
                check=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise DevenvError(f"cannot start the {what} build in the background: {exc}") from exc
    return True
