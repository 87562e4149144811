"""What the local launchers share at the process level: errors, ports, and a child process's lifetime.

The life cycle of a whole server (start, readiness, restart, stop) is `rollout_devenv._server`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
# How long a child gets to shut down cleanly (Kafka flushes its logs) before it is killed.
STOP_GRACE_S = 15.0


class DevenvError(Exception):
    """An expected failure (a tool is missing, a fetch or a start failed), told in one line.

    `detail` carries what helps to debug it (the tail of a log), kept apart so a command line can
    print the one line alone while a test report shows both.
    """

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def full_text(self) -> str:
        return f"{self.message}\n{self.detail}" if self.detail else self.message


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _can_bind(port: int) -> bool:
    # No SO_REUSEADDR on purpose: a port with connections still in TIME_WAIT counts as taken.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port that is free now, taken below the kernel's ephemeral range.

    A server restarted on the same port (as the fault-injection tests do) needs that port to stay
    free while it is down; a port in the ephemeral range could meanwhile become the local end of
    some outgoing connection.
    """
    low = _ephemeral_low()
    floor = max(1024, low - 12000)
    for _ in range(100):
        port = random.randint(floor, low - 1)
        if _can_bind(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def port_open(port: int, *, host: str = LOOPBACK) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def spawn(
    cmd: list[str], *, log_path: Path, cwd: Path, env: dict[str, str] | None = None, die_with_parent: bool = False
) -> subprocess.Popen[bytes]:
    """Start `cmd` with its output appended to `log_path`, in a session of its own.

    Its own session keeps a Ctrl-C in the terminal from reaching it before we stop it in order,
    and lets `stop_process` signal it and anything it spawned as one group. That also keeps it
    running when this process is SIGKILLed; `die_with_parent` has the kernel send it SIGTERM then
    (Linux), for a process that serves only while its caller runs (`python -m rollout_devenv ... run`).
    """
    with log_path.open("ab") as log:
        log.write(f"\n===== started {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_terminated_with(os.getpid()) if die_with_parent and sys.platform == "linux" else None,
        )


# prctl(2): the signal the kernel sends a child when the thread that forked it dies.
_PR_SET_PDEATHSIG = 1


def _terminated_with(parent: int) -> Callable[[], None]:
    """What the forked child runs before it execs: ask for SIGTERM when its parent dies, and stop at
    once when the parent died before the request took (the child was then handed to init)."""

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only calls into it

    def ask() -> None:
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            os._exit(1)

    return ask


def signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # start_new_session made the child a group leader, so its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def threads_stopped(pid: int) -> bool:
    """True once every thread of `pid` is in the stopped state. A SIGSTOP only starts the stop:
    `kill` returns before the target's threads get a CPU to take it, and on a loaded machine a
    thread woken by a connection meanwhile can still answer it."""
    try:
        states = [_thread_state(stat) for stat in Path(f"/proc/{pid}/task").glob("*/stat")]
    except OSError:
        return False
    return bool(states) and all(state == "T" for state in states)


def _thread_state(stat: Path) -> str:
    # The state follows the command name in parentheses, which may itself hold ") ".
    return stat.read_text().rpartition(")")[2].split()[0]


def stop_process(proc: subprocess.Popen[bytes], *, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the child's process group, wait up to `grace_s`, then SIGKILL it."""
    if proc.poll() is None:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()


def stop_processes(
    procs: Iterable[subprocess.Popen[Any]], *, grace_s: float = STOP_GRACE_S, whole_group: bool = False
) -> None:
    """Stop several children side by side: SIGTERM each (the process itself, which stops what it
    started, as a supervisor does its worker; with `whole_group`, its process group, as a Ctrl-C in
    a terminal reaches every process of the command), then wait for each, SIGKILLing the process
    group of any still running after `grace_s`."""
    running = [proc for proc in procs if proc.poll() is None]
    for proc in running:
        if whole_group:
            signal_group(proc, signal.SIGTERM)
            continue
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait()


def log_tail(path: Path, *, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_until(
    check: Callable[[], bool], *, alive: Callable[[], bool], timeout_s: float, interval_s: float = 0.25
) -> bool:
    """Poll `check` until it holds (True), the child dies or time runs out (both False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            return False
        if check():
            return True
        time.sleep(interval_s)
    return False
