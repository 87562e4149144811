"""The services as separate OS processes (`python -m ...`), each logging to a file, stopped after."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rollout_devenv import stop_processes

_STOP_GRACE_S = 15.0


@dataclass
class ServiceProcesses:
    log_dir: Path
    base_env: dict[str, str]
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    # What each name was started with, so `restart` can start it again the same way.
    _launches: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)

    def start(self, name: str, module_args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        return self._launch(name, module_args, env or {}, mode="wb")

    def restart(self, name: str) -> subprocess.Popen[bytes]:
        """Start `name` again with the same arguments and environment (after `kill`, say); its log
        file keeps the earlier run's lines, the new run's follow."""
        current = self.running[name]
        if current.poll() is None:
            raise RuntimeError(f"{name} is still running (pid {current.pid}); kill it first")
        module_args, env = self._launches[name]
        return self._launch(name, module_args, env, mode="ab")

    def _launch(self, name: str, module_args: list[str], env: dict[str, str], *, mode: str) -> subprocess.Popen[bytes]:
        merged = os.environ | self.base_env | env
        # The child keeps its own copy of the log file's descriptor; ours is closed at once.
        with (self.log_dir / f"{name}.log").open(mode) as log:
            process = subprocess.Popen(
                [sys.executable, "-m", *module_args],
                env=merged,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test run reaches only pytest; teardown stops these
            )
        self.running[name] = process
        self._launches[name] = (list(module_args), dict(env))
        return process

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown code runs, as when a machine dies."""
        process = self.running[name]
        process.kill()
        process.wait(10)

    def exited(self) -> dict[str, int]:
        return {name: code for name, p in self.running.items() if (code := p.poll()) is not None}

    def rss_kib(self, name: str) -> int:
        """Resident set size of the running process, in KiB (VmRSS of /proc/<pid>/status; Linux)."""
        status = Path(f"/proc/{self.running[name].pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1])

    def log_tail(self, name: str, chars: int = 3000) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-chars:]

    def stop_all(self) -> None:
        # The health monitor supervises a faust worker in its session: a kill takes both.
        stop_processes(self.running.values(), grace_s=_STOP_GRACE_S)
