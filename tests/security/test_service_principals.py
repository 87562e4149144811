"""The services as separate processes, each logged in as its own principal, on the secured broker.

Topics and the least-privilege ACLs of acl_table.py come from the administrator (`prepare`);
every service runs with `ROLLOUT_CREATE_TOPICS=false` and gets its login only through the shared
settings' variables (`ROLLOUT_KAFKA_SECURITY__*`), its Redis login through `ROLLOUT_REDIS_USERNAME`
/ `ROLLOUT_REDIS_PASSWORD` on a Redis that wants them. The operator publishes a release with the
CLI; a rollout step must go through end to end (stage-advance from the planner, upgrade results
from the executor, readiness from the health monitor fed by the reporter), and then no process's
output (at DEBUG) may hold any password.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from acl_table import EXECUTOR_GROUP, HEALTH_APP, PLANNER_GROUP, PRINCIPALS
from secure_kafka import REDIS_USER, SUPER_USER, SecureKafka, bodies

from rollout_common.topics.catalog import READINESS, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_devenv import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
CANARIES = ("can-1", "can-2")
CLUSTERS = (*CANARIES, "prod-1")
MASK = "**********"
STEP_TIMEOUT_S = 90.0
RUNNING = ("planner", "executor", "reporter", "monitor")


def _scenario() -> dict[str, object]:
    return {
        "name": "principals",
        "clusters": [
            {"name": name, "labels": {"env": "canary" if name in CANARIES else "prod"}, "version": OLD}
            for name in CLUSTERS
        ],
        "sequence": {
            "name": "principals",
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
            ],
        },
    }


def kafka_login(secure: SecureKafka, user: str) -> dict[str, str]:
    """A principal's Kafka login as the shared settings read it: variables only."""
    return {
        "ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "ROLLOUT_KAFKA_SECURITY__SASL_MECHANISM": "SCRAM-SHA-512",
        "ROLLOUT_KAFKA_SECURITY__SASL_USERNAME": user,
        "ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD": secure.password(user),
    }


def redis_login(redis: RedisServer) -> dict[str, str]:
    assert redis.password is not None
    return {
        "ROLLOUT_REDIS_URL": redis.url,
        "ROLLOUT_REDIS_USERNAME": REDIS_USER,
        "ROLLOUT_REDIS_PASSWORD": redis.password,
    }


def every_secret(secure: SecureKafka, redis: RedisServer) -> dict[str, str]:
    assert redis.password is not None
    return {f"kafka {user}": secure.password(user) for user in (SUPER_USER, *PRINCIPALS)} | {"redis": redis.password}


class Processes:
    """Each service as `python -m ...` with only its own variables; stdout and stderr to one file each."""

    def __init__(self, log_dir: Path, secure: SecureKafka) -> None:
        self.log_dir = log_dir
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        # Nothing inherited that could carry another login: the environment is built here.
        self.base = {
            key: value for key, value in os.environ.items() if not key.startswith(("ROLLOUT_", "KAFKA", "REDIS"))
        } | {
            "ROLLOUT_KAFKA_BOOTSTRAP": secure.bootstrap,
            "ROLLOUT_TOPIC_PREFIX": secure.prefix,
            "ROLLOUT_CREATE_TOPICS": "false",
            "ROLLOUT_LOG_LEVEL": "DEBUG",
        }

    def start(self, name: str, module_args: list[str], env: dict[str, str]) -> None:
        with (self.log_dir / f"{name}.log").open("wb") as log:
            self.running[name] = subprocess.Popen(
                [sys.executable, "-m", *module_args],
                env=self.base | env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.log_dir,
                start_new_session=True,
            )

    def run(self, name: str, module_args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        """A command that ends (the CLI); its output is kept with the others'."""
        done = subprocess.run(
            [sys.executable, "-m", *module_args],
            env=self.base | env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
            cwd=self.log_dir,
        )
        (self.log_dir / f"{name}.log").write_text(f"{done.stdout}\n--- stderr ---\n{done.stderr}")
        return done

    def exited(self) -> dict[str, int]:
        return {name: code for name, p in self.running.items() if (code := p.poll()) is not None}

    def tail(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.terminate()
        for process in self.running.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)  # the monitor supervises a faust worker in its session
                process.wait(5)


@pytest.fixture
def processes(tmp_path: Path, secure: SecureKafka) -> Iterator[Processes]:
    running = Processes(tmp_path, secure)
    try:
        yield running
    finally:
        running.stop_all()


def start_services(processes: Processes, secure: SecureKafka, redis: RedisServer, tmp_path: Path) -> None:
    prefix = secure.prefix
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(_scenario()))
    processes.start(
        "planner",
        ["rollout_planner.service"],
        kafka_login(secure, "planner")
        | redis_login(redis)
        | {
            "ROLLOUT_PLANNER_GROUP": prefix + PLANNER_GROUP,
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_SCENARIO_FILE": str(scenario),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
        },
    )
    processes.start(
        "executor",
        ["rollout_executor"],
        kafka_login(secure, "executor")
        | redis_login(redis)
        | {
            "ROLLOUT_EXECUTOR_ID": "executor-0",
            "ROLLOUT_GROUP_ID": prefix + EXECUTOR_GROUP,
            "ROLLOUT_REDIS_NAMESPACE": prefix + "executors",
            "ROLLOUT_DRIVER": "simulated",
            "ROLLOUT_SIMULATED__DURATIONS_S": json.dumps({"controlPlane": 0.3, "nodes": 0.3}),
            "ROLLOUT_LEASE_S": "3",
            "ROLLOUT_METRICS_PORT": "0",
        },
    )
    processes.start(
        "reporter",
        ["rollout_health", "reporter"],
        kafka_login(secure, "reporter")
        | {
            "ROLLOUT_CLUSTERS": json.dumps(list(CLUSTERS)),
            "ROLLOUT_PROBE_INTERVAL_S": "0.5",
            "ROLLOUT_HEARTBEAT_INTERVAL_S": "2",
            "ROLLOUT_SIMULATED__READY_AFTER_S": "0",
        },
    )
    processes.start(
        "monitor",
        ["rollout_health", "monitor"],
        kafka_login(secure, "health") | {"ROLLOUT_APP_ID": HEALTH_APP, "ROLLOUT_CHECK_INTERVAL_S": "1"},
    )


def read_logs(log_dir: Path) -> dict[str, str]:
    return {path.name: path.read_text(errors="replace") for path in sorted(log_dir.glob("*.log"))}


async def until(secure: SecureKafka, processes: Processes, topic: str, done: object) -> list[dict[str, object]]:
    """The topic's bodies (read as the administrator) once `done(bodies)` holds; fails early on a crash."""
    async with asyncio.timeout(STEP_TIMEOUT_S):
        while True:
            exited = processes.exited()
            assert not exited, f"exited {exited}:\n" + "\n".join(processes.tail(n) for n in exited)
            found = bodies(await secure.read_all(topic, settle_s=0.5))
            if done(found):  # type: ignore[operator]
                return found
            await asyncio.sleep(0.5)


async def test_a_rollout_step_works_end_to_end_under_least_privilege(
    secure: SecureKafka, secured_redis: RedisServer, processes: Processes, tmp_path: Path
) -> None:
    start_services(processes, secure, secured_redis, tmp_path)

    # The operator, with the CLI and the same variables as the services (its own principal).
    release = processes.run(
        "cli-release",
        [
            "rollout_cli.main",
            "release",
            "--bootstrap",
            secure.bootstrap,
            "--topic-prefix",
            secure.prefix,
            "--channel",
            "regular",
            "--target",
            f"1.30={NEW}",
            "--id",
            "rel-principals",
        ],
        kafka_login(secure, "operator"),
    )
    assert release.returncode == 0, release.stdout + release.stderr

    advances = await until(secure, processes, STAGE_ADVANCE.name, lambda bs: len(bs) >= 1)
    first = advances[0]
    assert (first["stage"], first["version"]) == ("canary", NEW)
    assert set(first["clusters"]) <= set(CANARIES)  # type: ignore[arg-type]
    results = await until(
        secure,
        processes,
        UPGRADE_RESULTS.name,
        lambda bs: {b["cluster"] for b in bs if b["outcome"] == "succeeded"} >= set(first["clusters"]),  # type: ignore[arg-type]
    )
    assert not [b for b in results if b["outcome"] == "failed"]
    # The health monitor (faust, as `health`) turns the reporter's heartbeats into readiness.
    readiness = await until(
        secure, processes, READINESS.name, lambda bs: {b.get("cluster") for b in bs} >= set(CLUSTERS)
    )
    assert readiness

    # The operator reads the planner's status from the password-protected Redis.
    status = processes.run(
        "cli-status",
        [
            "rollout_cli.main",
            "status",
            "--json",
            "--redis",
            secured_redis.url,
            "--namespace",
            secure.prefix,
        ],
        redis_login(secured_redis),
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)["clusters"] == len(CLUSTERS)

    processes.stop_all()
    logs = read_logs(tmp_path)
    assert set(logs) >= {f"{name}.log" for name in (*RUNNING, "cli-release", "cli-status")}
    # Each service logged its settings at start, with the secrets masked.
    for name in RUNNING:
        assert MASK in logs[f"{name}.log"], f"{name} logged no masked settings:\n{logs[f'{name}.log'][:2000]}"
    leaks = [
        (file, which)
        for file, text in logs.items()
        for which, secret in every_secret(secure, secured_redis).items()
        if secret in text
    ]
    assert leaks == []
