"""Kafka and Redis over TLS, with nothing but the shared settings' variables.

A broker whose client listener speaks only TLS and a Redis that takes only TLS connections, both
with a throwaway self-signed certificate (`rollout_devenv.tls`) that clients trust as their CA
(`ROLLOUT_KAFKA_SECURITY__SSL_CAFILE`, `ROLLOUT_REDIS_SSL_CA_CERTS`, a `rediss://` URL). The
four services run a rollout step through them; a certificate the CA does not vouch for stops a
client at once, with the setting to fix, instead of being retried as if the server were down.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_servers import running
from secure_kafka import SecureKafka
from service_set import Processes, a_rollout_step, run_module, start_services

from rollout_adapters.connections import kafka_bus, redis_store
from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.connection_settings import RedisServiceSettings
from rollout_common.errors import PermanentError
from rollout_common.topics import ALL
from rollout_common.topics.catalog import RELEASE_TARGETS
from rollout_devenv import KafkaBroker, RedisServer
from rollout_devenv.tls import TlsFiles, self_signed

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

# A wrong certificate must be reported within this: no retry loop in between.
REPORTED_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """Another self-signed certificate: a CA that vouches for neither server."""
    return self_signed(tmp_path_factory.mktemp("stranger"))


@pytest.fixture(scope="module")
def tls_broker(tls: TlsFiles) -> Iterator[KafkaBroker]:
    with running(KafkaBroker(tls=tls), what="the TLS Kafka broker") as broker:
        yield broker


@pytest.fixture(scope="module")
def tls_redis(tls: TlsFiles) -> Iterator[RedisServer]:
    with running(RedisServer(tls=tls), what="the TLS Redis") as server:
        yield server


def kafka_tls(ca: TlsFiles) -> dict[str, str]:
    return {"ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL": "SSL", "ROLLOUT_KAFKA_SECURITY__SSL_CAFILE": str(ca.cert)}


def redis_tls(server: RedisServer, ca: TlsFiles) -> dict[str, str]:
    return {"ROLLOUT_REDIS_URL": server.url, "ROLLOUT_REDIS_SSL_CA_CERTS": str(ca.cert)}


def settings(
    broker: KafkaBroker, redis: RedisServer, ca: TlsFiles, monkeypatch: pytest.MonkeyPatch, *, namespace: str
) -> RedisServiceSettings:
    """What a service reads from these variables."""
    for name in [k for k in os.environ if k.startswith("ROLLOUT_")]:
        monkeypatch.delenv(name)
    variables = {"ROLLOUT_KAFKA_BOOTSTRAP": broker.bootstrap, "ROLLOUT_REDIS_NAMESPACE": namespace}
    for name, value in {**variables, **kafka_tls(ca), **redis_tls(redis, ca)}.items():
        monkeypatch.setenv(name, value)
    return RedisServiceSettings()


async def test_a_bus_and_a_store_built_from_the_settings_work_over_tls(
    tls_broker: KafkaBroker, tls_redis: RedisServer, tls: TlsFiles, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings(tls_broker, tls_redis, tls, monkeypatch, namespace=topic_prefix)
    bus, store = kafka_bus(config, client_id=topic_prefix), redis_store(config)
    topic = RELEASE_TARGETS.spec(topic_prefix + ".")
    try:
        await bus.ensure_topics([topic])
        await bus.publish(topic.name, key=b"k", value=b"over tls")
        consumer = bus.consumer([topic.name], group=topic_prefix + ".g", from_beginning=True)
        async with asyncio.timeout(30):
            records = []
            while not records:
                records = await consumer.poll(timeout_s=0.5)
        assert [r.value for r in records] == [b"over tls"]
        await store.put("k", b"v")
        assert await store.get("k") == b"v"
    finally:
        await bus.close()
        await store.close()


async def test_a_broker_certificate_the_ca_does_not_vouch_for_is_permanent(
    tls_broker: KafkaBroker, tls_redis: RedisServer, stranger: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus = kafka_bus(settings(tls_broker, tls_redis, stranger, monkeypatch, namespace="stranger"), client_id="stranger")
    try:
        with pytest.raises(PermanentError) as caught:
            await asyncio.wait_for(bus.publish(RELEASE_TARGETS.name, key=b"k", value=b"v"), REPORTED_WITHIN_S)
    finally:
        await bus.close()
    text = str(caught.value)
    assert f"the TLS handshake with {tls_broker.bootstrap} failed" in text
    assert "CERTIFICATE_VERIFY_FAILED" in text
    assert "ROLLOUT_KAFKA_SECURITY__SSL_CAFILE" in text


async def test_a_redis_certificate_the_ca_does_not_vouch_for_is_permanent(
    tls_broker: KafkaBroker, tls_redis: RedisServer, stranger: TlsFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = redis_store(settings(tls_broker, tls_redis, stranger, monkeypatch, namespace="stranger"))
    try:
        with pytest.raises(PermanentError) as caught:
            await asyncio.wait_for(store.get("k"), REPORTED_WITHIN_S)
    finally:
        await store.close()
    assert "the TLS handshake failed" in str(caught.value)
    assert "ROLLOUT_REDIS_SSL_CA_CERTS" in str(caught.value)


async def test_a_rollout_step_works_end_to_end_over_tls(
    tls_broker: KafkaBroker, tls_redis: RedisServer, tls: TlsFiles, topic_prefix: str, tmp_path: Path
) -> None:
    prefix = topic_prefix + "."
    admin = KafkaBus(tls_broker.bootstrap, client_id=f"{prefix}admin", security=tls_broker.client_settings())
    try:
        await admin.ensure_topics([t.spec(prefix) for t in ALL])
    finally:
        await admin.close()
    processes = Processes(tmp_path, bootstrap=tls_broker.bootstrap, prefix=prefix)
    try:
        start_services(
            processes,
            prefix=prefix,
            kafka_env=lambda _user: kafka_tls(tls),
            redis_env=redis_tls(tls_redis, tls),
            work=tmp_path,
        )
        await a_rollout_step(
            SecureKafka(broker=tls_broker, prefix=prefix),
            processes,
            release_env=kafka_tls(tls),
            status_env=redis_tls(tls_redis, tls),
            redis_url=tls_redis.url,
        )
    finally:
        processes.stop_all()


async def test_a_planner_given_the_wrong_ca_stops_with_the_setting_to_fix(
    tls_broker: KafkaBroker, tls_redis: RedisServer, tls: TlsFiles, stranger: TlsFiles, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        "name: s\nclusters: [{name: c1, labels: {env: a}, version: 1.30.5-gke.1000}]\n"
        "sequence: {name: s, channel: regular, stages: [{name: a, clusterSelector: {matchLabels: {env: a}}}]}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUT_")} | {
        "ROLLOUT_KAFKA_BOOTSTRAP": tls_broker.bootstrap,
        **kafka_tls(stranger),
        **redis_tls(tls_redis, tls),
        "ROLLOUT_REDIS_NAMESPACE": "wrong-ca",
        "ROLLOUT_HTTP_PORT": "0",
        "ROLLOUT_SCENARIO_FILE": str(scenario),
    }
    done = await asyncio.to_thread(run_module, ["rollout_planner.service"], env=env, cwd=tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]
    assert "the TLS handshake with" in output and "ROLLOUT_KAFKA_SECURITY__SSL_CAFILE" in output
    assert "Traceback" not in output
