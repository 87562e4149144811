"""`make kafka` / `make redis` (python -m rollout_devenv): they say what happens to their data, delete it
when they stop unless given a data dir (DATA=DIR), and then keep data and address across restarts."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from devenv_command import Running

pytestmark = pytest.mark.integration

_REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def started() -> Iterator[list[Running]]:
    servers: list[Running] = []
    yield servers
    for server in servers:
        if server.process.poll() is None:
            server.stop()


def test_redis_without_a_data_dir_says_it_deletes_its_data(started: list[Running]) -> None:
    server = Running("redis", "run")
    started.append(server)
    assert server.announced.startswith("REDIS_URL=redis://127.0.0.1:")
    err = server.stop()
    note = next(line for line in err.splitlines() if line.startswith("data: "))
    data_dir = Path(note.removeprefix("data: ").split(",")[0])
    assert note.endswith(", deleted when it stops; keep it with --data-dir DIR (make ... DATA=DIR)")
    assert not data_dir.exists()


def test_redis_with_a_data_dir_keeps_data_and_port_across_a_restart(
    tmp_path: Path, started: list[Running], topic_prefix: str
) -> None:
    data = tmp_path / "redis"
    first = Running("redis", "run", "--data-dir", str(data))
    started.append(first)
    url = first.announced.removeprefix("REDIS_URL=")
    redis.Redis.from_url(url).set(topic_prefix, b"kept")
    err = first.stop()
    assert f"data: {data}, kept when it stops; the same --data-dir starts it again with that data and port" in err
    assert any(p.name.startswith("appendonly") for p in data.iterdir()), "written to an append-only file"
    second = Running("redis", "run", "--data-dir", str(data))
    started.append(second)
    assert second.announced == first.announced
    assert redis.Redis.from_url(url).get(topic_prefix) == b"kept"


@pytest.mark.parametrize("service", ["kafka", "redis"])
def test_make_passes_data_to_the_server_and_says_so_in_its_help(service: str) -> None:
    dry = subprocess.run(
        ["make", "-n", service, "DATA=/srv/keep"], cwd=_REPO, capture_output=True, text=True, check=True
    ).stdout
    assert f"-m rollout_devenv {service} run --data-dir /srv/keep" in dry
    assert (
        "--data-dir"
        not in subprocess.run(["make", "-n", service], cwd=_REPO, capture_output=True, text=True, check=True).stdout
    )
    assert "DATA=DIR keeps it" in (_REPO / "Makefile").read_text()


def test_a_server_does_not_outlive_its_command_killed_outright(started: list[Running]) -> None:
    """`make redis` SIGKILLed (a CI run's hard stop, the OOM killer) can stop nothing itself; the
    kernel sends its server SIGTERM, so no redis-server is left running. A broker left by a docs
    walk in CI, alive 20 minutes after its services stopped, had received no signal at all."""
    server = Running("redis", "run")
    started.append(server)
    port = int(server.announced.rsplit(":", 1)[1].split("/")[0])
    child = _server_pid(server.process.pid)
    assert redis.Redis(port=port).ping()
    server.process.kill()
    server.process.communicate(timeout=10)  # reaped, its pipes closed
    assert _gone_within(child, seconds=20), f"redis-server {child} still runs after its command was killed"
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=port, socket_connect_timeout=1).ping()


def _server_pid(parent: int) -> int:
    """The one process `parent` started (the server, in a session of its own)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _gone_within(pid: int, *, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists() or _state(pid) == "Z":
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "Z"
