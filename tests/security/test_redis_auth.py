"""Redis with authentication: a real redis-server that wants a password (requirepass, or an ACL user).

The right credentials work whether they come as arguments, in the URL or from the shared settings;
wrong or missing ones end at once in a PermanentError that names authentication (never a
TransientError that a service would retry for ever), and the password is in no message.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from secure_kafka import REDIS_USER
from service_set import run_module

from rollout_adapters.connections import redis_store
from rollout_adapters.redis_store import RedisStore
from rollout_common.connection_settings import RedisServiceSettings
from rollout_common.errors import PermanentError
from rollout_devenv import RedisServer
from rollout_devenv.redis import redis_answers_ping

pytestmark = pytest.mark.integration  # async tests run through asyncio_mode = auto

# A refused login must be reported this fast: no reconnect loop hides it.
REFUSED_WITHIN_S = 5.0


@pytest.fixture(scope="module")
def requirepass_redis() -> Iterator[RedisServer]:
    """`requirepass` only: clients AUTH with the password and no user name."""
    with RedisServer(password="requirepass-pw-5e1f") as server:
        yield server


async def _round_trip(store: RedisStore, key: str) -> bytes | None:
    try:
        await store.put(key, b"value")
        found = await store.get(key)
        await store.delete(key)
        return found
    finally:
        await store.close()


async def _refused(store: RedisStore, password: str | None) -> PermanentError:
    started = time.monotonic()
    try:
        with pytest.raises(PermanentError, match="authentication failed") as caught:
            await store.get("anything")
    finally:
        await store.close()
    assert time.monotonic() - started < REFUSED_WITHIN_S
    if password:
        assert password not in str(caught.value)
    return caught.value


def test_the_fixture_ping_authenticates(secured_redis: RedisServer, requirepass_redis: RedisServer) -> None:
    # Without AUTH (or with a wrong password) the server does not answer PING with PONG, so the
    # fixture's readiness check really logs in.
    assert secured_redis.password is not None
    assert not redis_answers_ping(secured_redis.port)
    assert not redis_answers_ping(secured_redis.port, password="wrong", user=REDIS_USER)
    assert redis_answers_ping(secured_redis.port, password=secured_redis.password, user=REDIS_USER)
    assert redis_answers_ping(requirepass_redis.port, password=requirepass_redis.password)
    assert secured_redis.password not in repr(secured_redis)
    # Nor is the password on the command line, where `ps` would show it to every local user.
    assert secured_redis.password not in Path(f"/proc/{secured_redis._proc.pid}/cmdline").read_text()  # type: ignore[union-attr]


async def test_the_right_acl_user_and_password_work(secured_redis: RedisServer, topic_prefix: str) -> None:
    store = RedisStore(secured_redis.url, namespace=topic_prefix, username=REDIS_USER, password=secured_redis.password)
    assert await _round_trip(store, "k") == b"value"


async def test_the_right_requirepass_password_works_as_argument_and_in_the_url(
    requirepass_redis: RedisServer, topic_prefix: str
) -> None:
    store = RedisStore(requirepass_redis.url, namespace=topic_prefix, password=requirepass_redis.password)
    assert await _round_trip(store, "k") == b"value"
    with_password = requirepass_redis.url.replace("redis://", f"redis://:{requirepass_redis.password}@")
    assert await _round_trip(RedisStore(with_password, namespace=topic_prefix), "k2") == b"value"


async def test_the_shared_settings_carry_the_credentials(
    secured_redis: RedisServer, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert secured_redis.password is not None
    monkeypatch.setenv("ROLLOUT_REDIS_URL", secured_redis.url)
    monkeypatch.setenv("ROLLOUT_REDIS_USERNAME", REDIS_USER)
    monkeypatch.setenv("ROLLOUT_REDIS_PASSWORD", secured_redis.password)
    monkeypatch.setenv("ROLLOUT_REDIS_NAMESPACE", topic_prefix)
    settings = RedisServiceSettings()
    assert secured_redis.password not in repr(settings)
    assert await _round_trip(redis_store(settings), "k") == b"value"


async def test_a_wrong_password_is_a_permanent_error_naming_authentication(
    secured_redis: RedisServer, requirepass_redis: RedisServer
) -> None:
    await _refused(RedisStore(secured_redis.url, username=REDIS_USER, password="not-it-91c3"), "not-it-91c3")
    await _refused(RedisStore(requirepass_redis.url, password="not-it-91c3"), "not-it-91c3")
    # The right password for a user that does not exist (or the disabled `default` user) is no better.
    assert secured_redis.password is not None
    await _refused(RedisStore(secured_redis.url, username="default", password=secured_redis.password), None)
    error = await _refused(
        RedisStore(secured_redis.url, username="nobody", password=secured_redis.password), secured_redis.password
    )
    assert "ROLLOUT_REDIS_PASSWORD" in str(error)


async def test_no_password_is_a_permanent_error_naming_authentication(
    secured_redis: RedisServer, requirepass_redis: RedisServer
) -> None:
    await _refused(RedisStore(secured_redis.url), None)
    await _refused(RedisStore(requirepass_redis.url), None)


def test_a_planner_with_a_wrong_redis_password_exits_with_one_line(
    secured_redis: RedisServer, topic_prefix: str, tmp_path: Path
) -> None:
    """Not retried for ever: the service stops at once and says why, without the password."""
    env = os.environ | {
        # Kafka is never reached: the planner reads its clock origin from Redis first.
        "ROLLOUT_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "ROLLOUT_REDIS_URL": secured_redis.url,
        "ROLLOUT_REDIS_USERNAME": REDIS_USER,
        "ROLLOUT_REDIS_PASSWORD": "wrong-redis-pw-7d2a",
        "ROLLOUT_REDIS_NAMESPACE": topic_prefix,
        "ROLLOUT_HTTP_PORT": "0",
    }
    done = run_module(["rollout_planner.service"], env=env, cwd=tmp_path, timeout_s=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "authentication failed" in done.stderr
    assert "wrong-redis-pw-7d2a" not in done.stdout + done.stderr
