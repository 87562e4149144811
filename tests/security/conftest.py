"""Fixtures of the security tests: one SASL/SCRAM broker with the StandardAuthorizer, and one
Redis that wants an ACL user and password, per session."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from local_servers import running
from secure_kafka import REDIS_USER, SUPER_USER, SecureKafka, new_passwords, prepare

from rollout_devenv import KafkaBroker, RedisServer


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[KafkaBroker]:
    broker = KafkaBroker(sasl_users=new_passwords(), super_user=SUPER_USER)
    with running(broker, what="the secured Kafka broker"):
        yield broker


@pytest.fixture
async def secure(secured_broker: KafkaBroker, topic_prefix: str) -> SecureKafka:
    """Topics and ACLs of the table in acl_table.py, under this test's own prefix."""
    return await prepare(secured_broker, topic_prefix + ".")


@pytest.fixture(scope="session")
def secured_redis() -> Iterator[RedisServer]:
    """A redis-server whose only user is `REDIS_USER` with a fresh random password (`default` is off)."""
    server = RedisServer(user=REDIS_USER, password=f"redis-pw-{secrets.token_hex(12)}")
    with running(server, what="the password-protected Redis"):
        yield server
