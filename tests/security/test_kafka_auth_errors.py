"""How `KafkaBus` reports what the secured broker refuses: a login, a topic, a group.

aiokafka 0.14 reports a refused SASL login only as `KafkaConnectionError: Unable to bootstrap`
(the reason is in its ERROR log line); the bus asks the broker once more itself and turns the
refusal into a `PermanentError` naming the cause, so a service stops at once with one line instead
of retrying as if the broker were down. Through the bus a topic the principal may not READ
fails the poll (the fetch is refused), and one it may not even DESCRIBE is reported missing
before the consumer joins.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from acl_table import WATCH_GROUP_PREFIX
from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from aiokafka.protocol.admin import CreateAclsRequest  # type: ignore[import-untyped]
from secure_kafka import REDIS_USER, SecureKafka
from service_set import run_module

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.errors import PermanentError, TransientError, UnknownTopicError
from rollout_common.topics.catalog import PROGRESS, RELEASE_TARGETS
from rollout_devenv import RedisServer
from rollout_devenv.acls import Operation, Pattern, Resource

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# A refused login or topic must be reported within this: no silent retry loop in between.
REPORTED_WITHIN_S = 30.0
_DENY = 2


def _bus(secure: SecureKafka, user: str, **changes: Any) -> KafkaBus:
    return KafkaBus(secure.bootstrap, client_id=f"{secure.prefix}{user}", security=secure.login(user) | changes)


async def _publish_refused(bus: KafkaBus, topic: str) -> PermanentError:
    started = time.monotonic()
    try:
        with pytest.raises(PermanentError) as caught:
            await asyncio.wait_for(bus.publish(topic, key=b"k", value=b"{}"), REPORTED_WITHIN_S)
    finally:
        await bus.close()
    assert time.monotonic() - started < REPORTED_WITHIN_S
    return caught.value


async def _poll_refused(bus: KafkaBus, topic: str, group: str) -> PermanentError:
    consumer = bus.consumer([topic], group=group)
    try:
        with pytest.raises(PermanentError) as caught:
            async with asyncio.timeout(REPORTED_WITHIN_S):
                while True:
                    await consumer.poll(timeout_s=0.5)
    finally:
        await bus.close()
    return caught.value


async def test_a_wrong_password_is_a_permanent_error_naming_the_sasl_login(secure: SecureKafka) -> None:
    wrong = "not-the-password-4b1e"
    bus = _bus(secure, "operator", sasl_plain_password=wrong)
    error = await _publish_refused(bus, secure.topic(RELEASE_TARGETS.name))
    text = str(error)
    assert "refused the SASL login of user 'operator' with SCRAM-SHA-512" in text
    assert "SaslAuthenticationFailed" in text
    assert "invalid credentials" in text
    assert "ROLLOUT_KAFKA_SECURITY__SASL_USERNAME" in text
    assert wrong not in text
    assert secure.password("operator") not in text


async def test_an_unknown_user_and_a_mechanism_the_broker_lacks_are_permanent_too(secure: SecureKafka) -> None:
    stranger = _bus(secure, "operator", sasl_plain_username="nobody-at-all")
    assert "user 'nobody-at-all'" in str(await _publish_refused(stranger, secure.topic(RELEASE_TARGETS.name)))
    # The broker takes SCRAM-SHA-512 only.
    other_mechanism = _bus(secure, "operator", sasl_mechanism="SCRAM-SHA-256")
    error = await _publish_refused(other_mechanism, secure.topic(RELEASE_TARGETS.name))
    assert "UnsupportedSaslMechanism" in str(error)


async def test_an_unreachable_broker_with_sasl_stays_a_transient_error(secure: SecureKafka) -> None:
    """Only a refusal the broker states is permanent; no answer at all is still worth a retry."""
    bus = KafkaBus("127.0.0.1:1", client_id=f"{secure.prefix}nowhere", security=secure.login("operator"))
    try:
        with pytest.raises(TransientError, match="Unable to bootstrap"):
            await asyncio.wait_for(bus.publish("t", key=None, value=b"x"), REPORTED_WITHIN_S)
    finally:
        await bus.close()


async def test_a_consumer_without_read_on_its_topic_fails_with_authorization(secure: SecureKafka) -> None:
    # The operator may WRITE release targets (so it sees the topic) but not READ them.
    error = await _poll_refused(
        secure.bus("operator"), secure.topic(RELEASE_TARGETS.name), secure.prefix + WATCH_GROUP_PREFIX + "a"
    )
    assert "TopicAuthorizationFailed" in str(error)


async def test_a_consumer_without_read_on_its_group_fails_with_authorization(secure: SecureKafka) -> None:
    error = await _poll_refused(secure.bus("operator"), secure.topic(PROGRESS.name), secure.prefix + "not-my-group")
    assert "GroupAuthorizationFailed" in str(error)


async def test_a_topic_the_principal_cannot_see_is_reported_missing_with_the_acl_hint(secure: SecureKafka) -> None:
    error = await _poll_refused(
        secure.bus("executor"), secure.topic(RELEASE_TARGETS.name), secure.prefix + "rollout-executors"
    )
    assert isinstance(error, UnknownTopicError)
    assert "user 'executor' has no ACL on them" in str(error)


async def _deny(secure: SecureKafka, user: str, topic: str, *operations: Operation) -> None:
    """DENY beats every ALLOW: as if an administrator took the permission away."""
    admin = AIOKafkaAdminClient(bootstrap_servers=secure.bootstrap, **secure.login())
    await admin.start()
    try:
        for operation in operations:
            request = CreateAclsRequest(
                int(Resource.TOPIC), topic, int(Pattern.LITERAL), f"User:{user}", "*", int(operation), _DENY
            )
            response = await admin._send_request(request)
            assert [code for code, _ in response.creation_responses] == [0]
    finally:
        await admin.close()


async def test_a_topic_taken_away_while_consuming_stops_the_consumer(secure: SecureKafka) -> None:
    """READ taken away (a DENY beats the ALLOW) while the member is joined: the next fetch is
    refused and the poll raises, instead of the member polling nothing for ever."""
    topic = secure.topic(PROGRESS.name)
    bus = secure.bus("operator")
    consumer = bus.consumer([topic], group=secure.prefix + WATCH_GROUP_PREFIX + "b")
    try:
        await consumer.poll(timeout_s=1.0)  # joined, allowed
        await _deny(secure, "operator", topic, Operation.DESCRIBE, Operation.READ)
        with pytest.raises(PermanentError, match="TopicAuthorizationFailed") as caught:
            async with asyncio.timeout(REPORTED_WITHIN_S):
                while True:
                    await consumer.poll(timeout_s=0.5)
        assert topic in str(caught.value)
    finally:
        await bus.close()


@pytest.mark.parametrize("module", [["rollout_planner.service"], ["rollout_executor"]], ids=["planner", "executor"])
async def test_a_service_with_a_wrong_kafka_password_stops_with_the_reason(
    secure: SecureKafka, secured_redis: RedisServer, module: list[str], tmp_path: Path
) -> None:
    assert secured_redis.password is not None
    wrong = "wrong-kafka-pw-0c7d"
    # A planner without a sequence waits for one before it touches Kafka: give it one.
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "name: s\nclusters: [{name: c1, labels: {env: a}, version: 1.30.5-gke.1000}]\n"
        "sequence: {name: s, channel: regular, stages: [{name: a, clusterSelector: {matchLabels: {env: a}}}]}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUT_")} | {
        "ROLLOUT_KAFKA_BOOTSTRAP": secure.bootstrap,
        "ROLLOUT_TOPIC_PREFIX": secure.prefix,
        "ROLLOUT_CREATE_TOPICS": "false",
        "ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "ROLLOUT_KAFKA_SECURITY__SASL_MECHANISM": "SCRAM-SHA-512",
        "ROLLOUT_KAFKA_SECURITY__SASL_USERNAME": module[0].split("_")[1].split(".")[0],
        "ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD": wrong,
        "ROLLOUT_REDIS_URL": secured_redis.url,
        "ROLLOUT_REDIS_USERNAME": REDIS_USER,
        "ROLLOUT_REDIS_PASSWORD": secured_redis.password,
        "ROLLOUT_REDIS_NAMESPACE": secure.prefix,
        "ROLLOUT_HTTP_PORT": "0",
        "ROLLOUT_METRICS_PORT": "0",
        "ROLLOUT_SCENARIO_FILE": str(scenario),
    }
    done = await asyncio.to_thread(run_module, module, env=env, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "refused the SASL login of user" in output
    assert wrong not in output
