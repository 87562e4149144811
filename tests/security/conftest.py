"""Fixtures of the security tests: one SASL/SCRAM broker with the StandardAuthorizer, and one
Redis that wants an ACL user and password, per session."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from secure_kafka import REDIS_USER, SUPER_USER, SecureKafka, new_passwords, prepare

from rollout_devenv import DevenvError, KafkaBroker, RedisServer


@pytest.fixture(scope="session")
def secured_broker() -> Iterator[KafkaBroker]:
    broker = KafkaBroker(sasl_users=new_passwords(), super_user=SUPER_USER)
    try:
        broker.start()
    except DevenvError as exc:
        broker.stop(remove_data=True)
        pytest.fail(f"the secured Kafka broker could not be started:\n{exc.full_text()}", pytrace=False)
    yield broker
    broker.stop(remove_data=True)


@pytest.fixture
async def secure(secured_broker: KafkaBroker, topic_prefix: str) -> SecureKafka:
    """Topics and ACLs of the table in acl_table.py, under this test's own prefix."""
    return await prepare(secured_broker, topic_prefix + ".")


@pytest.fixture(scope="session")
def secured_redis() -> Iterator[RedisServer]:
    """A redis-server whose only user is `REDIS_USER` with a fresh random password (`default` is off)."""
    server = RedisServer(user=REDIS_USER, password=f"redis-pw-{secrets.token_hex(12)}")
    try:
        server.start()
    except DevenvError as exc:
        server.stop(remove_data=True)
        pytest.fail(f"the password-protected Redis could not be started:\n{exc.full_text()}", pytrace=False)
    yield server
    server.stop(remove_data=True)
