"""`rollout demo` as a process of its own, with its dashboard on a free port, stopped after the test."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rollout_devenv import stop_processes

_URL = re.compile(r"^dashboard: (http://\S+)$", re.MULTILINE)
_START_TIMEOUT_S = 30.0


@contextmanager
def running_demo(log_dir: Path, *args: str) -> Iterator[str]:
    """Start the demo with `args` (plus a free dashboard port, kept serving after the run); yields the URL."""
    rollout = Path(sys.executable).with_name("rollout")
    command = [str(rollout), "demo", "--no-live", "--dashboard-port", "0", "--keep-serving", *args]
    stderr = log_dir / "demo.stderr"
    with (log_dir / "demo.stdout").open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield _wait_for_url(process, stderr)
    finally:
        stop_processes([process], grace_s=5.0)


def _wait_for_url(process: subprocess.Popen[bytes], stderr: Path) -> str:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = _URL.search(stderr.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise AssertionError(f"rollout demo exited ({process.returncode}): {stderr.read_text(errors='replace')}")
        time.sleep(0.05)
    raise AssertionError(f"rollout demo printed no dashboard URL in {_START_TIMEOUT_S:g} s")
