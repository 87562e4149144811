"""A real Redis server (Debian's `redis-server`) on a loopback port, no Docker."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

from rollout_devenv._proc import LOOPBACK, DevenvError, free_port, log_tail, spawn, stop_process, wait_until

DEFAULT_START_TIMEOUT_S = 20.0


def find_redis_server() -> Path:
    found = shutil.which("redis-server")
    if found is None:
        raise DevenvError("redis-server not found on PATH; install it (apt-get install redis-server)")
    return Path(found)


def redis_answers_ping(port: int) -> bool:
    """True once the server answers PING; while it loads its AOF it answers -LOADING instead."""
    with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=1.0) as conn:
        conn.sendall(b"PING\r\n")
        return conn.recv(64).startswith(b"+PONG")
    return False


class RedisServer:
    """One `redis-server` with its files in `data_dir`.

    By default it keeps nothing on disk (`--save "" --appendonly no`). With `aof=True` every write
    is fsynced to an append-only file in `data_dir`, so `restart()` comes back with the data.
    """

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        aof: bool = False,
        port: int | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        # A data dir made here is ours to delete in `stop(remove_data=True)`; a given one is not.
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="rollout-redis-")) if data_dir is None else data_dir
        self.log_path = self.data_dir / "redis.log"
        self.aof = aof
        self.start_timeout_s = start_timeout_s
        self._port = port
        self._proc: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"RedisServer(data_dir={str(self.data_dir)!r}, aof={self.aof}, {state})"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def port(self) -> int:
        if self._port is None:
            raise DevenvError("the Redis server has not been started yet, so it has no port")
        return self._port

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    def _command(self, binary: Path) -> list[str]:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        return [
            str(binary),
            "--port",
            str(self.port),
            "--bind",
            LOOPBACK,
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            *persistence,
            "--daemonize",
            "no",
            # An empty logfile means stdout, which `spawn` sends to log_path.
            "--logfile",
            "",
        ]

    def start(self) -> None:
        """Start the server and return once it answers PING."""
        if self.running:
            return
        binary = find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Chosen once: a restart comes back on the same port, so clients keep their URL.
        self._port = self._port or free_port()
        self._proc = spawn(self._command(binary), log_path=self.log_path, cwd=self.data_dir)
        atexit.register(self.stop)
        port = self.port
        if not wait_until(lambda: redis_answers_ping(port), alive=lambda: self.running, timeout_s=self.start_timeout_s):
            proc = self._proc
            why = f"it exited with code {proc.returncode}" if proc.poll() is not None else "no answer to PING"
            self.stop()
            raise DevenvError(f"redis-server did not start: {why}; see {self.log_path}", detail=log_tail(self.log_path))

    def stop(self, *, remove_data: bool = False) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s); `remove_data` also deletes a data
        dir that this object created."""
        if self._proc is not None:
            stop_process(self._proc)
            self._proc = None
        # Only now: a Ctrl-C that cut the stop short leaves the exit hook to finish it.
        atexit.unregister(self.stop)
        if remove_data and self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start again on the same data dir and port."""
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(remove_data=True)
