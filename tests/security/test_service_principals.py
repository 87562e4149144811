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

from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_table import PRINCIPALS
from secure_kafka import REDIS_USER, SUPER_USER, SecureKafka
from service_set import RUNNING, Processes, a_rollout_step, read_logs, start_services

from rollout_devenv import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

MASK = "**********"


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


@pytest.fixture
def processes(tmp_path: Path, secure: SecureKafka) -> Iterator[Processes]:
    running = Processes(tmp_path, bootstrap=secure.bootstrap, prefix=secure.prefix)
    try:
        yield running
    finally:
        running.stop_all()


async def test_a_rollout_step_works_end_to_end_under_least_privilege(
    secure: SecureKafka, secured_redis: RedisServer, processes: Processes, tmp_path: Path
) -> None:
    start_services(
        processes,
        prefix=secure.prefix,
        kafka_env=lambda user: kafka_login(secure, user),
        redis_env=redis_login(secured_redis),
        work=tmp_path,
    )

    # The operator, with the CLI and the same variables as the services (its own principal).
    await a_rollout_step(
        secure,
        processes,
        release_env=kafka_login(secure, "operator"),
        status_env=redis_login(secured_redis),
        redis_url=secured_redis.url,
    )

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
