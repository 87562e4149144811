"""A real Redis server (Debian's `redis-server`) on a loopback port, no Docker."""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
from pathlib import Path

from rollout_devenv._proc import LOOPBACK, DevenvError
from rollout_devenv._server import OnePortServer
from rollout_devenv.tls import TlsFiles

DEFAULT_START_TIMEOUT_S = 20.0


def find_redis_server() -> Path:
    found = shutil.which("redis-server")
    if found is None:
        raise DevenvError("redis-server not found on PATH; install it (apt-get install redis-server)")
    return Path(found)


def _resp(*parts: str) -> bytes:
    """One command as a RESP array: any byte of a password goes through unchanged."""
    encoded = [part.encode() for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(e), e) for e in encoded)


def redis_answers_ping(
    port: int, *, password: str | None = None, user: str | None = None, tls: ssl.SSLContext | None = None
) -> bool:
    """True once the server answers PING (after AUTH when a password is given); while it loads
    its AOF it answers -LOADING instead, and a refused AUTH answers -WRONGPASS."""
    with contextlib.suppress(OSError), _connect(port, tls) as conn:
        expected = b"+PONG\r\n"
        request = _resp("PING")
        if password is not None:
            auth = ("AUTH", user, password) if user is not None else ("AUTH", password)
            request = _resp(*auth) + request
            expected = b"+OK\r\n" + expected
        conn.sendall(request)
        answer = b""
        while len(answer) < len(expected) and not answer.startswith(b"-"):
            chunk = conn.recv(64)
            if not chunk:
                break
            answer += chunk
        return answer.startswith(expected)
    return False


def _connect(port: int, tls: ssl.SSLContext | None) -> socket.socket:
    conn = socket.create_connection((LOOPBACK, port), timeout=1.0)
    if tls is None:
        return conn
    try:
        return tls.wrap_socket(conn, server_hostname=LOOPBACK)
    except BaseException:
        conn.close()
        raise


class RedisServer(OnePortServer):
    """One `redis-server` with its files in `data_dir`.

    By default it keeps nothing on disk (`--save "" --appendonly no`). With `aof=True` every write
    is fsynced to an append-only file in `data_dir`, so `restart()` comes back with the data.

    `password` alone sets `requirepass` (clients AUTH with the password only); with `user` too,
    the `default` user is switched off and `user` is the only ACL user, with every permission
    (`user NAME on >PASSWORD ~* &* +@all`): clients AUTH with both. The password goes into a
    config file readable by the owner only, never onto the command line (where `ps` shows it),
    and it is not in `repr`. `url` carries no credentials; give them to the client separately.

    With `tls` (see `rollout_devenv.tls`) the server takes TLS connections only, on the same port;
    `url` is then a `rediss://` one, and clients check the server against `tls.cert`.
    """

    title = "redis-server"
    subject = "the Redis server"

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        aof: bool = False,
        port: int | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        password: str | None = None,
        user: str | None = None,
        tls: TlsFiles | None = None,
        replica_of: int | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        if user is not None and password is None:
            raise DevenvError("a Redis ACL user needs a password")
        if any(char.isspace() for char in (password or "") + (user or "")):
            raise DevenvError("the Redis user and password may not contain blanks")
        self.password = password
        self.user = user
        self.tls = tls
        super().__init__(
            data_dir=data_dir, prefix="rollout-redis-", log_name="redis.log", start_timeout_s=start_timeout_s
        )
        self.aof = aof
        self._ports = port
        # The loopback port of the primary this server replicates at start (Sentinel may change it).
        self.replica_of = replica_of
        self.extra_args = extra_args

    def __repr__(self) -> str:
        auth = f", user={self.user!r}" if self.user else ", password=***" if self.password else ""
        return f"RedisServer(data_dir={str(self.data_dir)!r}, aof={self.aof}{auth}, {self._state})"

    @property
    def url(self) -> str:
        scheme = "redis" if self.tls is None else "rediss"
        return f"{scheme}://{LOOPBACK}:{self.port}/0"

    def client_tls(self) -> ssl.SSLContext | None:
        """What a client checks this server's certificate with; None for a plain server."""
        return None if self.tls is None else ssl.create_default_context(cafile=str(self.tls.cert))

    def _listener(self) -> list[str]:
        if self.tls is None:
            return ["--port", str(self.port)]
        return [
            "--port", "0", "--tls-port", str(self.port),
            "--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key),
            "--tls-ca-cert-file", str(self.tls.cert),
            # Clients prove who they are with a password, not a certificate.
            "--tls-auth-clients", "no",
        ]  # fmt: skip

    def _auth_config(self) -> list[str]:
        """The config file holding the credentials (redis-server reads it as its first argument)."""
        if self.password is None:
            return []
        if self.user is None:
            lines = [f"requirepass {self.password}"]
        else:
            lines = ["user default off", f"user {self.user} on >{self.password} ~* &* +@all"]
        path = self.data_dir / "auth.conf"
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text("\n".join(lines) + "\n")
        return [str(path)]

    def _command(self, binary: Path) -> list[str]:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        replication = [] if self.replica_of is None else ["--replicaof", LOOPBACK, str(self.replica_of)]
        return [
            str(binary),
            *self._auth_config(),
            *self._listener(),
            "--bind",
            LOOPBACK,
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            *persistence,
            *replication,
            *self.extra_args,
            "--daemonize",
            "no",
            # An empty logfile means stdout, which `spawn` sends to log_path.
            "--logfile",
            "",
        ]

    def _start_once(self) -> None:
        """Start the server and return once it answers PING."""
        binary = find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = self._choose_ports()
        self._spawn(self._command(binary))
        password, user, tls = self.password, self.user, self.client_tls()

        def answers() -> bool:
            return redis_answers_ping(port, password=password, user=user, tls=tls)

        self._await(answers, why_not="no answer to PING")
