"""Access control on a real SASL/SCRAM-SHA-512 broker with the StandardAuthorizer.

Every principal gets only the ACLs of acl_table.py. The tests show that what a principal is not
granted fails at the broker with an authorization error and never reaches the planner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiokafka.errors as kerr  # type: ignore[import-untyped]
import pytest
from acl_table import PLANNER_GROUP, acls
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from canary_prod import NEW, canary_prod_state, forget_namespace
from secure_kafka import SUPER_USER, SecureKafka
from topic_reader import bodies

from rollout_adapters.redis_store import RedisStore
from rollout_common import envelope
from rollout_common.commands import CheckSeries
from rollout_common.errors import PermanentError, UnknownTopicError
from rollout_common.events import OperatorCommand, ReleaseTarget
from rollout_common.topics.catalog import CHECK_RESULTS, OPERATOR_COMMANDS, PROGRESS, RELEASE_TARGETS, STAGE_ADVANCE
from rollout_devenv.acls import describe_acls
from rollout_health.checks import PrometheusQuery
from rollout_health.checks.runner import CheckRunner
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import CheckRunnerSettings
from rollout_planner.engine import EngineState
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner
from rollout_planner.service.settings import PlannerSettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# How the broker refuses a produce without WRITE on the topic.
REFUSED = kerr.TopicAuthorizationFailedError

START = 1_767_225_600.0


def _encoded(model: ReleaseTarget | OperatorCommand, event_id: str) -> tuple[bytes, dict[str, bytes]]:
    return envelope.encode(model, event_id=event_id, source="test", at=START)


def _release(event_id: str = "rel-1") -> tuple[bytes, dict[str, bytes]]:
    return _encoded(ReleaseTarget(event_id=event_id, channel="regular", targets={"1.30": NEW}), event_id)


def _pause(command_id: str, issued_by: str) -> tuple[bytes, dict[str, bytes]]:
    return _encoded(
        OperatorCommand(command_id=command_id, action="pause", all_rollouts=True, issued_by=issued_by), command_id
    )


@contextlib.asynccontextmanager
async def planner_as(secure: SecureKafka, redis_url: str, user: str = "planner") -> AsyncIterator[Planner]:
    """The real planner in this process, logged in as `user`, with its state in the real Redis."""
    bus = secure.bus(user)
    store = RedisStore(redis_url, namespace=secure.prefix)
    settings = PlannerSettings(
        topic_prefix=secure.prefix,
        planner_group=secure.prefix + PLANNER_GROUP,
        create_topics=False,  # topics belong to the administrator; the planner may not create any
        poll_timeout_s=0.2,
        http_port=0,
        retry_backoff_s=0.05,
    )

    async def initial() -> EngineState:
        return canary_prod_state("sec")

    planner = Planner(bus=bus, store=store, settings=settings, clock=ManualClock(START), initial_state=initial)
    task = asyncio.create_task(planner.run())
    try:
        yield planner
    finally:
        planner.stop()
        try:
            await asyncio.wait_for(task, 30)
        finally:
            await bus.close()
            await store.close()
            await forget_namespace(redis_url, secure.prefix)


async def test_the_broker_holds_exactly_the_least_privilege_acls(secure: SecureKafka) -> None:
    found = [acl for acl in await describe_acls(secure.bootstrap, secure.login()) if acl[3].startswith(secure.prefix)]
    expected = sorted(
        (a.principal, a.resource.name, a.pattern.name, a.name, a.operation.name) for a in acls(secure.prefix)
    )
    assert found == expected
    assert not [acl for acl in found if acl[0] == "User:intruder"]


async def test_a_wrong_password_is_refused_at_login(secure: SecureKafka, caplog: pytest.LogCaptureFixture) -> None:
    login = secure.login("operator") | {"sasl_plain_password": "not-the-password"}
    producer = AIOKafkaProducer(bootstrap_servers=secure.bootstrap, **login)
    # aiokafka 0.14 reports a refused login as a failed bootstrap; the broker's reason is only in
    # its log record (docs/security.md: a wrong password looks like an unreachable broker).
    with caplog.at_level("ERROR", logger="aiokafka"), pytest.raises(kerr.KafkaConnectionError):
        await asyncio.wait_for(producer.start(), 30)
    await producer.stop()
    assert "SaslAuthenticationFailed" in caplog.text
    assert "invalid credentials" in caplog.text
    assert "not-the-password" not in caplog.text


async def test_only_the_operator_can_pause_a_rollout(secure: SecureKafka, redis_url: str) -> None:
    async with planner_as(secure, redis_url) as planner:
        value, headers = _release()
        await secure.produce("operator", RELEASE_TARGETS.name, key=b"regular", value=value, headers=headers)
        await secure.read(STAGE_ADVANCE.name, until=lambda rs: len(rs) >= 1)

        # Neither a stranger nor the executor may write operator commands: the broker refuses the
        # produce itself, so the record never exists for the planner to read.
        for user in ("intruder", "executor", "health"):
            value, headers = _pause(f"pause-by-{user}", user)
            with pytest.raises(REFUSED):
                await secure.produce(user, OPERATOR_COMMANDS.name, key=b"all", value=value, headers=headers)
        # Through the services' own bus the refusal is a PermanentError: retrying cannot help.
        bus = secure.bus("executor")
        try:
            with pytest.raises(PermanentError, match=r"do not exist|TopicAuthorizationFailed"):
                await bus.publish(secure.topic(OPERATOR_COMMANDS.name), key=b"all", value=value, headers=headers)
        finally:
            await bus.close()

        assert await secure.read_all(OPERATOR_COMMANDS.name) == []
        progress = bodies(await secure.read_all(PROGRESS.name))
        assert not [b for b in progress if b["kind"] == "command_ack"]
        assert not [b for b in progress if b.get("state") == "PAUSED"]
        assert planner.metrics.dead_letters._value.get() == 0

        # The operator's pause is read, applied and acknowledged: the planner was listening all along.
        value, headers = _pause("pause-by-operator", "operator")
        await secure.produce("operator", OPERATOR_COMMANDS.name, key=b"all", value=value, headers=headers)
        progress = bodies(
            await secure.read(PROGRESS.name, until=lambda rs: any(b["kind"] == "command_ack" for b in bodies(rs)))
        )
    [ack] = [b for b in progress if b["kind"] == "command_ack"]
    assert (ack["commandId"], ack["accepted"]) == ("pause-by-operator", True)
    assert any(b["kind"] == "rollout_transition" and b["state"] == "PAUSED" for b in progress)


async def test_the_executor_cannot_publish_release_targets(secure: SecureKafka, redis_url: str) -> None:
    async with planner_as(secure, redis_url):
        value, headers = _release("rel-by-executor")
        with pytest.raises(REFUSED):
            await secure.produce("executor", RELEASE_TARGETS.name, key=b"regular", value=value, headers=headers)
        bus = secure.bus("executor")
        try:
            # Without DESCRIBE the topic is not even in the executor's metadata, so the bus reports
            # it missing before it tries to produce (still a PermanentError: no retry).
            with pytest.raises(UnknownTopicError, match="do not exist"):
                await bus.publish(secure.topic(RELEASE_TARGETS.name), key=b"regular", value=value, headers=headers)
            # Nor may it play the planner: stage-advance is the planner's to write, the executor
            # only reads (and so sees) it, and the produce itself is refused.
            with pytest.raises(PermanentError, match="TopicAuthorizationFailed"):
                await bus.publish(secure.topic(STAGE_ADVANCE.name), key=b"x", value=value, headers=headers)
        finally:
            await bus.close()
        # nothing reached the release topic, so there is nothing a decision could come from
        assert await secure.read_all(RELEASE_TARGETS.name) == []
        assert await secure.read_all(STAGE_ADVANCE.name) == []
        assert await secure.read_all(PROGRESS.name) == []


async def test_an_intruder_cannot_read_commands_nor_the_executor_commit_as_the_planner(secure: SecureKafka) -> None:
    value, headers = _release()
    await secure.produce("operator", RELEASE_TARGETS.name, key=b"regular", value=value, headers=headers)
    await secure.read(RELEASE_TARGETS.name, until=lambda rs: len(rs) == 1)  # it is there, for those allowed
    # aiokafka either raises the refusal or (depending on when its metadata arrives) logs it and
    # keeps asking; either way not one record reaches the intruder.
    seen: list[object] = []

    def got_one(records: list[object]) -> bool:
        seen.extend(records)
        return bool(records)

    with pytest.raises((kerr.TopicAuthorizationFailedError, TimeoutError)):
        await secure.read(RELEASE_TARGETS.name, user="intruder", until=got_one, timeout_s=5)
    assert seen == []
    # Committing offsets for the planner's group (which would make the planner skip records) needs
    # READ on that group: refused to the executor, which may read stage-advance but not as the planner.
    consumer = AIOKafkaConsumer(
        bootstrap_servers=secure.bootstrap,
        group_id=secure.prefix + PLANNER_GROUP,
        enable_auto_commit=False,
        **secure.login("executor"),
    )
    await consumer.start()
    try:
        partition = TopicPartition(secure.topic(STAGE_ADVANCE.name), 0)
        consumer.assign([partition])
        with pytest.raises(kerr.GroupAuthorizationFailedError):
            await asyncio.wait_for(consumer.commit({partition: 0}), 20)
    finally:
        await consumer.stop()


async def test_a_planner_with_least_privilege_checks_the_topics_it_reads_without_a_false_finding(
    secure: SecureKafka, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """READ implies DESCRIBE but not DESCRIBE_CONFIGS: the start-up look at the topics it reads
    (issue 21) finds nothing wrong with topics the administrator made as the settings say, and
    never stops the planner."""
    with caplog.at_level("WARNING", logger="rollout.topics"):
        async with planner_as(secure, redis_url) as planner:
            async with asyncio.timeout(60):
                while True:  # ready once its consumer has polled: the check ran before
                    if planner.ready:
                        break
                    await asyncio.sleep(0.05)
    assert [r.getMessage() for r in caplog.records if r.name == "rollout.topics"] == []


async def test_chk2_the_check_runner_works_with_its_own_grants_and_writes_nothing_else(
    secure: SecureKafka, redis_url: str
) -> None:
    """The check runner logged in as `checks`: it reads the series the planner announced and publishes
    its result (inconclusive here: no sequence stored); the broker refuses its writes to the
    progress and operator-command topics."""
    series = CheckSeries(rollout_id="sec-1", stage="prod", check="errors", running=True, since=START, interval=1.0)
    value, headers = envelope.encode(series, event_id="series-1", source="test", at=START)
    # Announced as the administrator: the broker's authorizer may take a moment to apply the grants
    # just created, and what is tested here is the `checks` principal, not the planner's.
    await secure.produce(SUPER_USER, PROGRESS.name, key=b"sec-1", value=value, headers=headers)
    settings = CheckRunnerSettings(
        topic_prefix=secure.prefix,
        create_topics=False,
        redis_url=redis_url,
        redis_namespace=secure.prefix,
        idle_poll_s=0.2,
        checks={"prometheus_url": "http://127.0.0.1:1", "timeout_s": 1.0},
    )
    bus = secure.bus("checks")
    store = RedisStore(redis_url, namespace=secure.prefix)
    stop = asyncio.Event()
    async with PrometheusQuery(settings.checks) as query:
        runner = CheckRunner(bus=bus, store=store, query=query, settings=settings, metrics=HealthMetrics())
        task = asyncio.create_task(runner.run(stop))
        try:
            results = bodies(await secure.read(CHECK_RESULTS.name, until=lambda records: len(records) >= 1))
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await bus.close()
            await store.close()
    assert [(b["rolloutId"], b["check"], b["outcome"]) for b in results[:1]] == [("sec-1", "errors", "inconclusive")]

    for topic in (PROGRESS.name, OPERATOR_COMMANDS.name):
        with pytest.raises(REFUSED):
            await secure.produce("checks", topic, key=b"sec-1", value=value, headers=headers)
