"""The shared Kafka security / Redis auth settings: parsed from ROLLOUT_* variables by every
service, turned into client options, and never shown with their secrets."""

from __future__ import annotations

import json
import logging
import os
import ssl
from pathlib import Path

import faust
import pytest

from rollout_adapters.connections import kafka_bus, kafka_security_options, redis_store
from rollout_adapters.faust_credentials import broker_credentials
from rollout_adapters.kafka_bus import ConsumerOptions
from rollout_common.connection_settings import KafkaSecurity, ServiceSettings, load, loggable, masked_url
from rollout_common.errors import InvalidInputError
from rollout_common.json_logging import JsonFormatter
from rollout_executor.settings import ExecutorSettings
from rollout_health.settings import MonitorSettings, ReporterSettings
from rollout_planner.service.settings import PlannerSettings

SECRET = "s3cr3t-Pa55"
MODELS: list[type[ServiceSettings]] = [PlannerSettings, ExecutorSettings, ReporterSettings, MonitorSettings]


@pytest.fixture
def sasl_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("ROLLOUT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SASL_USERNAME", "rollout")
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD", SECRET)
    monkeypatch.setenv("ROLLOUT_KAFKA_REPLICATION_FACTOR", "3")
    monkeypatch.setenv("ROLLOUT_REDIS_USERNAME", "planner")
    monkeypatch.setenv("ROLLOUT_REDIS_PASSWORD", SECRET)
    monkeypatch.setenv("ROLLOUT_REDIS_URL", f"redis://old:{SECRET}@redis:6379/0")


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
@pytest.mark.usefixtures("sasl_env")
def test_every_service_reads_the_same_security_variables(model: type[ServiceSettings]) -> None:
    settings = load(model)
    security = settings.kafka_security
    assert security.security_protocol.value == "SASL_PLAINTEXT"
    assert security.sasl_mechanism.value == "SCRAM-SHA-512"
    assert security.sasl_username == "rollout"
    assert security.sasl_password is not None and security.sasl_password.get_secret_value() == SECRET
    assert settings.kafka_replication_factor == 3
    # The secret shows in no repr, str or loggable form.
    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)
    assert SECRET not in json.dumps(loggable(settings))


@pytest.mark.usefixtures("sasl_env")
def test_redis_credentials_are_read_and_win_over_the_url() -> None:
    settings = load(PlannerSettings)
    assert settings.redis_username == "planner"
    assert settings.redis_password is not None and settings.redis_password.get_secret_value() == SECRET
    logged = loggable(settings)
    assert logged["redis_password"] == "**********"
    assert logged["redis_url"] == "redis://old:**********@redis:6379/0"
    store = redis_store(settings)
    kwargs = store._redis.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"]) == ("planner", SECRET)


@pytest.mark.usefixtures("sasl_env")
def test_a_json_log_line_of_the_settings_masks_the_secrets() -> None:
    settings = load(ExecutorSettings)
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "starting", None, None)
    record.settings = loggable(settings)
    line = JsonFormatter().format(record)
    assert SECRET not in line
    assert json.loads(line)["settings"]["kafka_security"]["sasl_password"] == "**********"


def test_sasl_without_credentials_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD", SECRET)
    with pytest.raises(InvalidInputError, match="needs sasl_username and sasl_password") as caught:
        load(ExecutorSettings, what="executor settings")
    assert SECRET not in str(caught.value)


def test_a_bad_value_is_named_without_echoing_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "s.yaml"
    config.write_text(f"kafka_security:\n  security_protocol: SASL_PLAIN\n  sasl_password: {SECRET}\n")
    with pytest.raises(InvalidInputError, match=r"kafka_security\.security_protocol") as caught:
        load(PlannerSettings, config)
    assert SECRET not in str(caught.value)


def test_masked_url_keeps_everything_but_the_password() -> None:
    assert masked_url("rediss://user:pw@host:6380/1") == "rediss://user:**********@host:6380/1"
    assert masked_url("redis://:pw@host/0") == "redis://:**********@host/0"
    assert masked_url("redis://host:6379/0") == "redis://host:6379/0"


def test_client_options_follow_the_protocol() -> None:
    assert kafka_security_options(KafkaSecurity()) == {"security_protocol": "PLAINTEXT"}
    sasl = KafkaSecurity(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", sasl_username="u", sasl_password=SECRET
    )
    options = kafka_security_options(sasl)
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-256"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("u", SECRET)
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert "ssl_context" not in kafka_security_options(
        KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password=SECRET)
    )


def test_faust_gets_the_same_credentials() -> None:
    assert broker_credentials(KafkaSecurity()) is None
    assert isinstance(broker_credentials(KafkaSecurity(security_protocol="SSL")), faust.SSLCredentials)
    sasl = broker_credentials(
        KafkaSecurity(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
    )
    assert isinstance(sasl, faust.SASLCredentials)
    assert (sasl.username, sasl.password, sasl.mechanism.value) == ("u", "p", "PLAIN")


def test_mutual_tls_needs_both_files() -> None:
    with pytest.raises(ValueError, match="go together"):
        KafkaSecurity(security_protocol="SSL", ssl_certfile=Path("/c.pem"))


@pytest.mark.usefixtures("sasl_env")
async def test_the_bus_gets_security_and_consumer_options() -> None:
    settings = load(PlannerSettings)
    options = ConsumerOptions(group_instance_id="planner-0", max_poll_interval_ms=900_000)
    bus = kafka_bus(settings, client_id="t", consumer_options=options)
    try:
        client = bus._client_settings()
        assert client["security_protocol"] == "SASL_PLAINTEXT"
        assert client["sasl_plain_password"] == SECRET
        assert bus.consumer_options.group_instance_id == "planner-0"
    finally:
        await bus.close()


def test_consumer_options_refuse_a_heartbeat_slower_than_the_session() -> None:
    with pytest.raises(InvalidInputError):
        ConsumerOptions(session_timeout_ms=1000, heartbeat_interval_ms=1000)
