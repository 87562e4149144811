"""The life cycle every local server shares (Kafka, Redis, etcd, kube-apiserver): its data dir,
its child process, start with a readiness deadline, retry on a lost port, stop, restart."""

from __future__ import annotations

import atexit
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Generic, NoReturn, Self, TypeVar

from rollout_devenv._proc import (
    DevenvError,
    free_port,
    log_tail,
    signal_group,
    spawn,
    stop_process,
    threads_stopped,
    wait_until,
)

# What a server listens on: one port, or a pair such as a broker's client and controller ports.
Ports = TypeVar("Ports")
# How long a SIGSTOPped process may take to stop: its threads need a CPU to take the signal.
STOP_WAIT_S = 10.0


class LocalServer(Generic[Ports]):
    """One server process on loopback with its files in `data_dir`.

    A subclass says what it is in `title` (the start of its error messages) and `subject` (the
    server named in a sentence), how to find free ports in `_new_ports`, and starts its process in
    `_start_once`: `_choose_ports`, `_spawn` the command, `_await` readiness. `start` wraps that:
    a failed start never leaves a process behind, and a subclass with `port_attempts` above one
    chooses new ports when another process took a chosen one first (not ports given or kept from
    an earlier start).
    """

    title: str
    subject: str
    port_attempts: ClassVar[int] = 1

    def __init__(self, *, data_dir: Path | None, prefix: str, log_name: str, start_timeout_s: float) -> None:
        # A data dir made here is ours to delete in `stop(remove_data=True)`; a given one is not.
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix=prefix)) if data_dir is None else data_dir
        self.log_path = self.data_dir / log_name
        self.start_timeout_s = start_timeout_s
        self._ports: Ports | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        # Set by a command that serves the process only while it runs (`_serve`): the kernel stops
        # the process when its starter dies, even by SIGKILL. Not for servers a test or a thread
        # starts: the signal follows the thread that forked it.
        self.die_with_parent = False

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def _state(self) -> str:
        """How a `repr` says whether it runs."""
        return "running" if self.running else "stopped"

    @property
    def _started_ports(self) -> Ports:
        if self._ports is None:
            raise DevenvError(f"{self.subject} has not been started yet, so it has no port")
        return self._ports

    def _new_ports(self) -> Ports:
        raise NotImplementedError

    def _choose_ports(self) -> Ports:
        """Chosen once: a restart comes back on the same ports, so clients keep their address."""
        if not self._ports:
            self._ports = self._new_ports()
        return self._ports

    def _release_ports(self) -> None:
        """Forget ports another process took (a subclass also drops what it set up with them)."""
        self._ports = None

    def _start_once(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Start the process and return once it is ready; a DevenvError says why it is not."""
        if self.running:
            return
        kept = self._ports is not None
        for attempt in range(1, self.port_attempts + 1):
            try:
                self._start_once()
                return
            except BaseException as exc:
                self.stop()
                # A free port found earlier can be taken by another process before ours binds it
                # (a loaded machine running other servers).
                lost = isinstance(exc, DevenvError) and "address already in use" in log_tail(self.log_path)
                if kept or attempt == self.port_attempts or not lost:
                    raise
                self._release_ports()

    def _spawn(self, cmd: list[str]) -> None:
        self._proc = spawn(cmd, log_path=self.log_path, cwd=self.data_dir, die_with_parent=self.die_with_parent)
        # A script or test session that exits without calling stop() must not leave a process behind.
        atexit.register(self.stop)

    def _await(self, check: Callable[[], bool], *, why_not: str, interval_s: float = 0.25) -> None:
        """Wait up to `start_timeout_s` for `check`; else fail, saying `why_not` unless it exited."""
        if not wait_until(check, alive=lambda: self.running, timeout_s=self.start_timeout_s, interval_s=interval_s):
            self._fail_start(why_not)

    def _fail_start(self, why: str) -> NoReturn:
        proc = self._proc
        if proc is not None and proc.poll() is not None:
            why = f"it exited with code {proc.returncode}"
        self.stop()
        raise DevenvError(f"{self.title} did not start: {why}; see {self.log_path}", detail=log_tail(self.log_path))

    def stop(self, *, remove_data: bool = False) -> None:
        """Stop the process (SIGTERM, then SIGKILL after the grace period); `remove_data` also
        deletes a data dir that this object created."""
        if self._proc is not None:
            # A paused process would sit out the whole grace period before its SIGKILL.
            signal_group(self._proc, signal.SIGCONT)
            stop_process(self._proc)
            self._proc = None
        # Only now: a Ctrl-C that cut the stop short leaves the exit hook to finish it.
        atexit.unregister(self.stop)
        if remove_data and self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the process (and what it started): no shutdown code runs, as when a machine dies.
        The data dir and ports stay, so `start()` brings it back as it was on disk."""
        if self._proc is not None:
            signal_group(self._proc, signal.SIGKILL)
            self._proc.wait()
            self._proc = None
        atexit.unregister(self.stop)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its sockets but answers nothing until `resume()`. Returns
        once it has stopped, so whatever the caller does next meets a process that answers nothing."""
        if self._proc is not None:
            signal_group(self._proc, signal.SIGSTOP)
            self._await_stopped(self._proc)

    def _await_stopped(self, proc: subprocess.Popen[bytes]) -> None:
        if not wait_until(
            lambda: threads_stopped(proc.pid), alive=lambda: proc.poll() is None, timeout_s=STOP_WAIT_S, interval_s=0.01
        ):
            raise DevenvError(f"{self.subject} did not stop within {STOP_WAIT_S:.0f} s of its SIGSTOP")

    def resume(self) -> None:
        if self._proc is not None:
            signal_group(self._proc, signal.SIGCONT)

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def restart(self) -> None:
        """Stop and start again on the same data dir and ports."""
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(remove_data=True)


class OnePortServer(LocalServer[int]):
    """A server with a single loopback port, `port`."""

    @property
    def port(self) -> int:
        return self._started_ports

    def _new_ports(self) -> int:
        return free_port()
