"""`python -m rollout_devenv ...` (what `make kafka`, `make redis` and `make prometheus` run) as a
test starts it: the line it announces once its server is ready, and a stop as Ctrl-C gives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


class Running:
    """`python -m rollout_devenv <argv>` until `stop` (SIGTERM, as Ctrl-C)."""

    def __init__(self, *argv: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rollout_devenv", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.announced = self.process.stdout.readline().strip()  # blocks until the server is ready

    def stop(self) -> str:
        """Stops it (SIGKILL to its group after 30 s), asserts it exited 0 and returns its stderr."""
        self.process.send_signal(signal.SIGTERM)
        try:
            _, err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            _, err = self.process.communicate()
        assert self.process.returncode == 0, err
        return err
