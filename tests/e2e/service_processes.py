"""The services as separate OS processes (`python -m ...`), each logging to a file, stopped after."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

_STOP_GRACE_S = 15.0


@dataclass
class ServiceProcesses:
    log_dir: Path
    base_env: dict[str, str]
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, module_args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        merged = os.environ | self.base_env | (env or {})
        # The child keeps its own copy of the log file's descriptor; ours is closed at once.
        with (self.log_dir / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", *module_args],
                env=merged,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test run reaches only pytest; teardown stops these
            )
        self.running[name] = process
        return process

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown code runs, as when a machine dies."""
        process = self.running[name]
        process.kill()
        process.wait(10)

    def exited(self) -> dict[str, int]:
        return {name: code for name, p in self.running.items() if (code := p.poll()) is not None}

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-chars:]

    def stop_all(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                # The health monitor supervises a faust worker in the same session: kill both.
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(5)
