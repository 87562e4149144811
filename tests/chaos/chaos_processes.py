"""The services as OS processes that a fault schedule can SIGKILL and start again with the same env.

Unlike `tests/e2e/service_processes.py` (which this mirrors), a process keeps its command line and
environment so that `restart` brings back the same service, each incarnation appends to the
same log file, and a kill takes the whole process group: the health monitor supervises a faust
worker in its own session, and a machine that dies takes both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rollout_devenv import stop_processes

_STOP_GRACE_S = 15.0


@dataclass
class _Spec:
    module_args: list[str]
    env: dict[str, str]


@dataclass
class ChaosProcesses:
    workdir: Path
    base_env: dict[str, str]
    running: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    specs: dict[str, _Spec] = field(default_factory=dict)
    kills: dict[str, list[float]] = field(default_factory=dict)  # name -> wall times its SIGKILLs took it
    down: set[str] = field(default_factory=set)  # killed on purpose and not started again yet

    def start(self, name: str, module_args: list[str], env: dict[str, str] | None = None) -> None:
        self.specs[name] = _Spec(module_args, dict(env or {}))
        self._spawn(name)

    def _spawn(self, name: str) -> None:
        spec = self.specs[name]
        merged = os.environ | self.base_env | spec.env
        with (self.workdir / f"{name}.log").open("ab") as log:
            log.write(f"\n===== start {name} at {time.time():.3f} =====\n".encode())
            log.flush()
            self.running[name] = subprocess.Popen(
                [sys.executable, "-m", *spec.module_args],
                env=merged,
                cwd=self.workdir,  # faust's data dir and anything else relative lands here
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, name: str) -> float:
        """SIGKILL the process group, as when the machine dies; returns the wall time by which the
        process was gone. Not the time the signal was sent: until it lands the process runs on (on a
        loaded machine for milliseconds), and what it did then was interrupted by this kill too. An
        audit that asks whether a kill came after something the process did needs this time."""
        process = self.running[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        gone = time.time()
        self.kills.setdefault(name, []).append(gone)
        self.down.add(name)
        return gone

    def restart(self, name: str) -> None:
        """Start the same service again with the same command line and environment."""
        self.down.discard(name)
        self._spawn(name)

    def unexpected_exits(self) -> dict[str, int]:
        """Processes that ended by themselves (a SIGKILL of ours is followed by a restart at once)."""
        return {
            name: code for name, p in self.running.items() if name not in self.down and (code := p.poll()) is not None
        }

    def log_tail(self, name: str, chars: int = 3000) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def kill_all(self) -> None:
        """SIGKILL every process group: after the audit nothing of theirs is needed any more."""
        for name in self.running:
            self.down.add(name)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.running[name].pid, signal.SIGKILL)
        for process in self.running.values():
            process.wait(10)

    def stop_all(self) -> None:
        stop_processes(self.running.values(), grace_s=_STOP_GRACE_S)
        # A faust worker outliving its supervisor would keep a group member on the broker.
        for process in self.running.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
