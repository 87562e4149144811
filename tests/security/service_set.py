"""The four services as separate processes with only their own variables, for the security
tests that run a rollout step through them: under least-privilege SASL principals
(test_service_principals.py) and over TLS (test_tls.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from acl_table import EXECUTOR_GROUP, HEALTH_APP, PLANNER_GROUP
from secure_kafka import SecureKafka
from topic_reader import bodies

from rollout_common.topics.catalog import READINESS, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_devenv import stop_processes

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
CANARIES = ("can-1", "can-2")
CLUSTERS = (*CANARIES, "prod-1")
STEP_TIMEOUT_S = 90.0
RUNNING = ("planner", "executor", "reporter", "monitor")


def scenario() -> dict[str, object]:
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


def run_module(
    module_args: list[str], *, env: dict[str, str], cwd: Path | None = None, timeout_s: float = 90.0
) -> subprocess.CompletedProcess[str]:
    """`python -m MODULE ARGS...` to its end with exactly `env`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", *module_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        cwd=cwd,
    )


class Processes:
    """Each service as `python -m ...` with only its own variables; stdout and stderr to one file each."""

    def __init__(self, log_dir: Path, *, bootstrap: str, prefix: str) -> None:
        self.log_dir = log_dir
        self.running: dict[str, subprocess.Popen[bytes]] = {}
        # Nothing inherited that could carry another login: the environment is built here.
        self.base = {
            key: value for key, value in os.environ.items() if not key.startswith(("ROLLOUT_", "KAFKA", "REDIS"))
        } | {
            "ROLLOUT_KAFKA_BOOTSTRAP": bootstrap,
            "ROLLOUT_TOPIC_PREFIX": prefix,
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
        done = run_module(module_args, env=self.base | env, cwd=self.log_dir)
        (self.log_dir / f"{name}.log").write_text(f"{done.stdout}\n--- stderr ---\n{done.stderr}")
        return done

    def exited(self) -> dict[str, int]:
        return {name: code for name, p in self.running.items() if (code := p.poll()) is not None}

    def tail(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        stop_processes(self.running.values(), grace_s=20)


def start_services(
    processes: Processes,
    *,
    prefix: str,
    kafka_env: Callable[[str], dict[str, str]],
    redis_env: dict[str, str],
    work: Path,
) -> None:
    """Planner, executor, health reporter and monitor, each with `kafka_env(its principal)`;
    the planner and executor with `redis_env` too. The planner plans `scenario()`."""
    scenario_file = work / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario()))
    processes.start(
        "planner",
        ["rollout_planner.service"],
        kafka_env("planner")
        | redis_env
        | {
            "ROLLOUT_PLANNER_GROUP": prefix + PLANNER_GROUP,
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_SCENARIO_FILE": str(scenario_file),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
        },
    )
    processes.start(
        "executor",
        ["rollout_executor"],
        kafka_env("executor")
        | redis_env
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
        kafka_env("reporter")
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
        kafka_env("health") | {"ROLLOUT_APP_ID": HEALTH_APP, "ROLLOUT_CHECK_INTERVAL_S": "1"},
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


async def a_rollout_step(
    secure: SecureKafka,
    processes: Processes,
    *,
    release_env: dict[str, str],
    status_env: dict[str, str],
    redis_url: str,
) -> None:
    """The operator releases with the CLI (`release_env`); the planner's first batch goes through
    the executor, the monitor turns the reporter's heartbeats into readiness, and `rollout status`
    (`status_env`) reads the planner's status from Redis."""
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
            "rel-step",
        ],
        release_env,
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

    # The operator reads the planner's status from Redis.
    status = processes.run(
        "cli-status",
        [
            "rollout_cli.main",
            "status",
            "--json",
            "--redis",
            redis_url,
            "--namespace",
            secure.prefix,
        ],
        status_env,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)["clusters"] == len(CLUSTERS)
