"""Redis as production runs it without a managed service: a primary, one replica and three
Sentinels that promote the replica when the primary dies, all Debian's `redis-server` on loopback
(a Sentinel is `redis-server <conf> --sentinel`; no separate package is needed).

Each server keeps its port and data dir across `kill()` / `start()`; both servers write an
append-only file (a primary restarted empty before Sentinel noticed would hand its replica an empty
data set). `kill_primary()` SIGKILLs whichever server is the primary now and waits for Sentinel to
promote the other; `pause()` on the replica (SIGSTOP) makes it fall behind, so a promotion loses the
writes the primary acknowledged meanwhile, which is the failure Redis's asynchronous replication
allows.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rollout_devenv._proc import LOOPBACK, DevenvError, free_port, stop_processes
from rollout_devenv._server import OnePortServer
from rollout_devenv.redis import RedisServer, find_redis_server, redis_answers_ping

DEFAULT_SERVICE = "rollout"
SENTINELS = 3
QUORUM = 2
# How long a primary stays silent before a Sentinel calls it down; with the election, a failover
# takes about two seconds after the primary dies.
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 10000
DEFAULT_START_TIMEOUT_S = 30.0
# A primary drops a replica that acknowledged nothing for 3 s (default 60 s), so a paused replica
# is cut off quickly and stays behind; the primary pings every second so an idle link is not
# mistaken for a dead one on the replica's side.
_REPLICATION_ARGS = ("--repl-timeout", "3", "--repl-ping-replica-period", "1")


def _client(port: int) -> Any:
    import redis

    return redis.Redis(host=LOOPBACK, port=port, socket_timeout=1.0, socket_connect_timeout=1.0, decode_responses=True)


def _ask(port: int, *command: str) -> Any:
    """One command to a loopback server; None when it does not answer."""
    client = _client(port)
    try:
        return client.execute_command(*command)
    except Exception:
        return None
    finally:
        client.close()


class SentinelServer(OnePortServer):
    """One Sentinel watching `service` on `primary_port`, with its config file in `data_dir`.

    Sentinel rewrites that file with what it learns (the current primary, the other Sentinels), so a
    restart writes it only when it is missing, and the Sentinel comes back knowing the failovers."""

    title = "redis-sentinel"
    subject = "the Redis Sentinel"

    def __init__(
        self, *, primary_port: int, service: str, data_dir: Path | None = None, start_timeout_s: float = 20.0
    ) -> None:
        super().__init__(
            data_dir=data_dir, prefix="rollout-sentinel-", log_name="sentinel.log", start_timeout_s=start_timeout_s
        )
        self.primary_port = primary_port
        self.service = service

    def __repr__(self) -> str:
        return f"SentinelServer(port={self._ports}, service={self.service!r}, {self._state})"

    @property
    def _config(self) -> Path:
        return self.data_dir / "sentinel.conf"

    def _write_config(self) -> None:
        if self._config.is_file():
            return
        name = self.service
        lines = [
            f"port {self.port}",
            f"bind {LOOPBACK}",
            f"dir {self.data_dir}",
            "daemonize no",
            'logfile ""',
            f"sentinel monitor {name} {LOOPBACK} {self.primary_port} {QUORUM}",
            f"sentinel down-after-milliseconds {name} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {name} 1",
        ]
        self._config.write_text("\n".join(lines) + "\n")

    def _start_once(self) -> None:
        binary = find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = self._choose_ports()
        self._write_config()
        self._spawn([str(binary), str(self._config), "--sentinel"])
        self._await(lambda: redis_answers_ping(port), why_not="no answer to PING")

    def primary_port_now(self) -> int | None:
        """The port of the primary this Sentinel names now (None when it does not answer)."""
        answer = _ask(self.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        return int(answer[1]) if answer else None


def _two_free_ports() -> tuple[int, int]:
    first = free_port()
    second = free_port()
    while second == first:
        second = free_port()
    return first, second


def _primary_and_replica(data_dir: Path, *, first: int, second: int, start_timeout_s: float) -> list[RedisServer]:
    """The primary on `first` and its replica on `second`, each with its data dir made."""
    servers = [
        RedisServer(
            data_dir=data_dir / "redis-a",
            aof=True,
            port=first,
            start_timeout_s=start_timeout_s,
            extra_args=_REPLICATION_ARGS,
        ),
        RedisServer(
            data_dir=data_dir / "redis-b",
            aof=True,
            port=second,
            replica_of=first,
            start_timeout_s=start_timeout_s,
            extra_args=_REPLICATION_ARGS,
        ),
    ]
    for server in servers:
        server.data_dir.mkdir(parents=True, exist_ok=True)
    return servers


class RedisSentinelGroup:
    """A primary, a replica and three Sentinels watching them under the service name `service`.

    `sentinels` are the `host:port` addresses a client asks for the primary (redis-py's
    `Sentinel(...).master_for(service)`); `url` is the primary's address when the group started.
    """

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        service: str = DEFAULT_SERVICE,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="rollout-redis-sentinel-")) if data_dir is None else data_dir
        self.service = service
        first, second = _two_free_ports()
        self.servers = _primary_and_replica(self.data_dir, first=first, second=second, start_timeout_s=start_timeout_s)
        self.sentinel_servers = [
            SentinelServer(primary_port=first, service=service, data_dir=self.data_dir / f"sentinel-{n}")
            for n in range(1, SENTINELS + 1)
        ]
        for sentinel in self.sentinel_servers:
            sentinel.data_dir.mkdir(parents=True, exist_ok=True)
        self.start_timeout_s = start_timeout_s
        self.last_start_s: float | None = None

    def __repr__(self) -> str:
        return f"RedisSentinelGroup(service={self.service!r}, servers={self.servers}, {self.sentinel_servers})"

    @property
    def sentinels(self) -> list[str]:
        return [f"{LOOPBACK}:{sentinel.port}" for sentinel in self.sentinel_servers]

    @property
    def url(self) -> str:
        return self.servers[0].url

    @property
    def running(self) -> bool:
        return all(s.running for s in (*self.servers, *self.sentinel_servers))

    @property
    def log_path(self) -> Path:
        return self.servers[0].log_path

    def start(self) -> None:
        """Start what is not running and return once every Sentinel knows the primary, the replica
        and the two other Sentinels, and the replica is in sync."""
        started = time.monotonic()
        try:
            for server in (*self.servers, *self.sentinel_servers):
                server.start()
            self._wait(self._settled, why="the Sentinels never agreed on the primary, its replica and each other")
            self.last_start_s = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def _settled(self) -> bool:
        primary = self.primary()
        if primary is None:
            return False
        for sentinel in self.sentinel_servers:
            replicas = _ask(sentinel.port, "SENTINEL", "REPLICAS", self.service) or []
            others = _ask(sentinel.port, "SENTINEL", "SENTINELS", self.service) or []
            healthy = [r for r in replicas if "down" not in _fields(r).get("flags", "down")]
            if len(healthy) != len(self.servers) - 1 or len(others) != SENTINELS - 1:
                return False
        return self.replicas_in_sync()

    def _wait(self, check: Any, *, why: str, timeout_s: float | None = None) -> None:
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.2)
        raise DevenvError(
            f"Redis with Sentinel: {why} within {timeout_s or self.start_timeout_s:.0f} s; see {self.data_dir}"
        )

    def primary(self) -> RedisServer | None:
        """The server every running Sentinel names as primary, once it says so itself."""
        named = {sentinel.primary_port_now() for sentinel in self.sentinel_servers if sentinel.running}
        if len(named) != 1:
            return None
        (port,) = named
        server = next((s for s in self.servers if s._ports == port), None)
        if server is None or not server.running or _role(server.port) != "master":
            return None
        return server

    def replica(self) -> RedisServer:
        """The server that is not the primary (the primary's replica once it is back)."""
        primary = self.primary()
        if primary is None:
            raise DevenvError("Redis with Sentinel: no primary now, so no replica to name")
        return next(s for s in self.servers if s is not primary)

    def replicas_in_sync(self) -> bool:
        """Every running replica is linked to the primary and has its whole replication stream."""
        primary = self.primary()
        if primary is None:
            return False
        info = _info(primary.port)
        offset = info.get("master_repl_offset")
        for server in self.servers:
            if server is primary or not server.running:
                continue
            mine = _info(server.port)
            if mine.get("master_link_status") != "up" or mine.get("slave_repl_offset") != offset:
                return False
        return True

    def wait_for_primary(self, *, other_than: RedisServer | None = None, timeout_s: float = 60.0) -> RedisServer:
        """The primary, waited for: after a kill, until Sentinel has promoted another server."""
        found: list[RedisServer] = []

        def promoted() -> bool:
            primary = self.primary()
            if primary is None or primary is other_than:
                return False
            found.append(primary)
            return True

        self._wait(promoted, why="no server was promoted to primary", timeout_s=timeout_s)
        return found[-1]

    def kill_primary(self) -> tuple[RedisServer, RedisServer]:
        """SIGKILL the primary and wait for Sentinel to promote the replica: (killed, promoted)."""
        old = self.primary()
        if old is None:
            raise DevenvError("Redis with Sentinel: no primary to kill")
        old.kill()
        return old, self.wait_for_primary(other_than=old)

    def lag_replica(self, *, timeout_s: float = 30.0) -> RedisServer:
        """Pause (SIGSTOP) the replica and wait until the primary has dropped it: every write from
        now on is acknowledged by the primary alone and is lost if it dies before `resume()`.
        (Merely paused, the replica would still find the writes in its socket buffer on resuming.)"""
        primary = self.primary()
        if primary is None:
            raise DevenvError("Redis with Sentinel: no primary now, so no replica to hold back")
        replica = next(s for s in self.servers if s is not primary)
        replica.pause()
        self._wait(
            lambda: _info(primary.port).get("connected_slaves") == "0",
            why="the primary never dropped its paused replica",
            timeout_s=timeout_s,
        )
        return replica

    def bring_back(self, server: RedisServer) -> None:
        """Start a killed server again as a replica of the primary now: left to Sentinel, it would
        come back as a second primary for the ten-odd seconds Sentinel takes to turn it round."""
        primary = self.primary()
        server.replica_of = None if primary is None else primary.port
        server.start()

    def wait_in_sync(self, *, timeout_s: float = 60.0) -> None:
        """Wait until every running replica (a restarted old primary too) has caught up."""
        self._wait(self.replicas_in_sync, why="a replica did not catch up", timeout_s=timeout_s)

    def recover(self) -> None:
        """Everything running again after a test's faults: paused servers resumed, killed ones
        brought back as replicas, the replicas caught up."""
        for server in (*self.servers, *self.sentinel_servers):
            server.resume()
        for sentinel in self.sentinel_servers:
            sentinel.start()
        if self.primary() is None:
            self.wait_for_primary()
        for server in self.servers:
            if not server.running:
                self.bring_back(server)
        self.wait_in_sync()

    def stop(self, *, remove_data: bool = False) -> None:
        for server in (*self.servers, *self.sentinel_servers):
            server.resume()
        stop_processes([s._proc for s in (*self.servers, *self.sentinel_servers) if s._proc is not None])
        for server in (*self.servers, *self.sentinel_servers):
            server.stop()
        if remove_data and self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RedisSentinelGroup:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(remove_data=True)


def _fields(flat: Any) -> dict[str, str]:
    """A Sentinel reply entry: a flat [name, value, ...] list (RESP2) or a mapping."""
    if isinstance(flat, dict):
        return {str(k): str(v) for k, v in flat.items()}
    with contextlib.suppress(TypeError):
        return {str(flat[i]): str(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
    return {}


def _info(port: int) -> dict[str, str]:
    answer = _ask(port, "INFO", "replication")
    if isinstance(answer, dict):
        return {str(k): str(v) for k, v in answer.items()}
    return {}


def _role(port: int) -> str | None:
    return _info(port).get("role")
