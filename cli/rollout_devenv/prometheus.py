"""A real Prometheus server (Debian's `prometheus`) on a loopback port, scraping given targets, no Docker.

The metric checks (CHK-2) ask it `/api/v1/query`; the tests point it at a small exporter of their
own whose gauges they set. With `basic_auth` it requires that user and password on every request
(its `--web.config.file`, the password stored as a bcrypt hash as Prometheus expects).
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import secrets
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml

from rollout_devenv._proc import LOOPBACK, DevenvError
from rollout_devenv._server import OnePortServer

DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_SCRAPE_INTERVAL_S = 1.0
# The cost of the password hash: low, since this is a test server and Prometheus hashes every
# request's password (cost 10 would add tens of milliseconds to each query on a loaded machine).
_BCRYPT_COST = 5
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def find_prometheus() -> Path:
    found = shutil.which("prometheus")
    if found is None:
        raise DevenvError("prometheus not found on PATH; install it (apt-get install prometheus)")
    return Path(found)


def bcrypt_hash(password: str) -> str:
    """The password's bcrypt hash, from the system's libcrypt (libxcrypt knows `$2b$`).

    Through ctypes rather than Python's `crypt` module, which newer Pythons no longer ship.
    """
    name = ctypes.util.find_library("crypt")
    if name is None:
        raise DevenvError("libcrypt not found; it hashes the Prometheus password (apt-get install libcrypt1)")
    libcrypt = ctypes.CDLL(name)
    libcrypt.crypt.restype = ctypes.c_char_p
    libcrypt.crypt.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    salt = "".join(secrets.choice(_BCRYPT_ALPHABET) for _ in range(22))
    hashed = libcrypt.crypt(password.encode(), f"$2b${_BCRYPT_COST:02d}${salt}".encode())
    if not hashed or not hashed.startswith(b"$2b$"):
        raise DevenvError("this system's libcrypt cannot make bcrypt hashes, which Prometheus needs")
    return str(hashed.decode())


def basic_auth_header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class PrometheusServer(OnePortServer):
    """One `prometheus` with its config, its TSDB and its log in `data_dir`.

    `scrape_targets` (`host:port` each) are scraped every `scrape_interval_s` as job `rollout-test`;
    targets can be changed before a start. `url` is the base URL clients query.
    """

    title = "prometheus"
    subject = "the Prometheus server"
    # A chosen port can be taken by another process before Prometheus binds it: it tries new ones.
    port_attempts = 3

    def __init__(
        self,
        *,
        scrape_targets: Sequence[str] = (),
        scrape_interval_s: float = DEFAULT_SCRAPE_INTERVAL_S,
        data_dir: Path | None = None,
        port: int | None = None,
        basic_auth: tuple[str, str] | None = None,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        if basic_auth is not None and (":" in basic_auth[0] or not all(basic_auth)):
            raise DevenvError("the Prometheus basic-auth user needs a name without ':' and a password")
        super().__init__(
            data_dir=data_dir, prefix="rollout-prometheus-", log_name="prometheus.log", start_timeout_s=start_timeout_s
        )
        self.scrape_targets = tuple(scrape_targets)
        self.scrape_interval_s = scrape_interval_s
        self.basic_auth = basic_auth
        self._ports = port

    def __repr__(self) -> str:
        auth = f", user={self.basic_auth[0]!r}" if self.basic_auth else ""
        targets = list(self.scrape_targets)
        return f"PrometheusServer(data_dir={str(self.data_dir)!r}, targets={targets}{auth}, {self._state})"

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _config(self) -> Path:
        interval = f"{round(self.scrape_interval_s * 1000)}ms"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": "rollout-test",
                    "scrape_interval": interval,
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": list(self.scrape_targets)}],
                }
            ],
        }
        path = self.data_dir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _web_config(self) -> list[str]:
        if self.basic_auth is None:
            return []
        user, password = self.basic_auth
        path = self.data_dir / "web.yml"
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(yaml.safe_dump({"basic_auth_users": {user: bcrypt_hash(password)}}))
        return [f"--web.config.file={path}"]

    def _command(self, binary: Path) -> list[str]:
        return [
            str(binary),
            f"--config.file={self._config()}",
            f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            *self._web_config(),
        ]

    def ready(self) -> bool:
        """True once `/-/ready` answers 200 (with the credentials when it needs them)."""
        request = urllib.request.Request(f"{self.url}/-/ready")
        if self.basic_auth is not None:
            request.add_header("Authorization", basic_auth_header(*self.basic_auth))
        try:
            with urllib.request.urlopen(request, timeout=2.0) as answer:
                return int(answer.status) == 200
        except (OSError, ValueError):
            return False

    def freeze(self) -> None:
        """Stop the process where it is (SIGSTOP): its port still takes connections, nothing answers,
        as a server that hangs does. `thaw` lets it go on. Returns once it has stopped."""
        self._await_stopped(self._signal(signal.SIGSTOP))

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def stop(self, *, remove_data: bool = False) -> None:
        # A frozen process would hold its SIGTERM until the kill after the grace period.
        if self.running:
            self.thaw()
        super().stop(remove_data=remove_data)

    def _signal(self, sig: signal.Signals) -> subprocess.Popen[bytes]:
        """The process, sent `sig`."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise DevenvError(f"{self.subject} is not running")
        proc.send_signal(sig)
        return proc

    def _start_once(self) -> None:
        binary = find_prometheus()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._choose_ports()
        self._spawn(self._command(binary))
        self._await(self.ready, why_not="/-/ready never answered 200")


__all__ = ["PrometheusServer", "basic_auth_header", "bcrypt_hash", "find_prometheus"]
