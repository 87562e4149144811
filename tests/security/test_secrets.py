"""Configured passwords stay out of everything the system prints: generated docs, settings' repr
and str, what is logged of them, error messages, and the CLI's one-line errors.

The services' whole output under real logins (startup lines included, at DEBUG) is checked by
test_service_principals.py; here each surface is checked on its own, secrets set through the
environment as a deployment would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings
from secure_kafka import SecureKafka
from service_set import run_module

from rollout_common.connection_settings import RedisServiceSettings, ServiceSettings, load, loggable
from rollout_common.errors import InvalidInputError
from rollout_executor.settings import ExecutorSettings
from rollout_health.settings import MonitorSettings, ReporterSettings
from rollout_planner.service.settings import PlannerSettings

SASL_PASSWORD = "sasl-secret-3f9a1c"
REDIS_PASSWORD = "redis-secret-8b2d7e"
URL_PASSWORD = "url-secret-c40e55"
SECRETS = (SASL_PASSWORD, REDIS_PASSWORD, URL_PASSWORD)

SECRET_ENV = {
    "ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "ROLLOUT_KAFKA_SECURITY__SASL_MECHANISM": "SCRAM-SHA-512",
    "ROLLOUT_KAFKA_SECURITY__SASL_USERNAME": "planner",
    "ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD": SASL_PASSWORD,
    "ROLLOUT_REDIS_URL": f"redis://rollout:{URL_PASSWORD}@127.0.0.1:6390/0",
    "ROLLOUT_REDIS_USERNAME": "rollout",
    "ROLLOUT_REDIS_PASSWORD": REDIS_PASSWORD,
}

MODELS: tuple[type[BaseSettings], ...] = (
    ServiceSettings,
    RedisServiceSettings,
    PlannerSettings,
    ExecutorSettings,
    ReporterSettings,
    MonitorSettings,
)


def _clean_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ROLLOUT_")}
    return base | extra


def _assert_no_secret(text: str, where: str) -> None:
    found = [secret for secret in SECRETS if secret in text]
    assert not found, f"{where} holds {found}"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_no_settings_model_shows_a_password(model: type[BaseSettings], secret_env: None) -> None:
    settings = model()
    security = settings.kafka_security  # type: ignore[attr-defined]
    assert security.sasl_password.get_secret_value() == SASL_PASSWORD  # the variable did arrive
    for where, text in {
        "repr": repr(settings),
        "str": str(settings),
        "repr(kafka_security)": repr(security),
        "loggable": json.dumps(loggable(settings)),
    }.items():
        _assert_no_secret(text, f"{model.__name__} {where}")
    # model_dump_json masks SecretStr fields but is a data export, not a log form: a password
    # inside redis_url stays in it (docs/security.md). Only loggable() is for logs.
    _assert_no_secret(settings.model_dump_json(exclude={"redis_url"}), f"{model.__name__} model_dump_json")
    if isinstance(settings, RedisServiceSettings):
        assert settings.redis_password is not None
        assert settings.redis_password.get_secret_value() == REDIS_PASSWORD


def test_a_settings_error_names_the_field_not_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    # A password but no user name: refused, and the message does not repeat what was given.
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD", SASL_PASSWORD)
    monkeypatch.setenv("ROLLOUT_REDIS_PASSWORD", REDIS_PASSWORD)
    monkeypatch.setenv("ROLLOUT_POLL_TIMEOUT_S", "-1")
    with pytest.raises(InvalidInputError) as caught:
        load(PlannerSettings, what="planner settings")
    assert "sasl_username" in str(caught.value)
    _assert_no_secret(str(caught.value), "the settings error")


def test_config_docs_output_holds_no_password(tmp_path: Path) -> None:
    output = tmp_path / "configuration.md"
    done = run_module(
        ["rollout_cli.main", "config-docs", "--output", str(output)], env=_clean_env(**SECRET_ENV), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    text = output.read_text()
    assert "ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD" in text  # the variable is documented, not its value
    _assert_no_secret(text + done.stdout + done.stderr, "config-docs output")


def test_each_service_refusing_bad_settings_prints_no_password(tmp_path: Path) -> None:
    """The first lines a service prints when its settings are refused (before it logs anything)."""
    env = _clean_env(**(SECRET_ENV | {"ROLLOUT_KAFKA_SECURITY__SASL_USERNAME": ""}))
    for module in (["rollout_planner.service"], ["rollout_executor"], ["rollout_health", "reporter"]):
        done = run_module(module, env=env, timeout_s=60)
        assert done.returncode == 2, (module, done.stdout, done.stderr)
        assert "sasl_username" in done.stderr
        _assert_no_secret(done.stdout + done.stderr, f"{module} output")


def test_the_cli_with_a_wrong_kafka_password_says_so_in_one_line(secure: SecureKafka, tmp_path: Path) -> None:
    env = _clean_env(**(SECRET_ENV | {"ROLLOUT_KAFKA_SECURITY__SASL_USERNAME": "operator"}))
    done = run_module(
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
            "1.30=1.31.13-gke.1023000",
        ],
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # refused: invalid input, not unreachable
    [line] = done.stderr.strip().splitlines()
    assert "refused the SASL login of user 'operator'" in line
    _assert_no_secret(done.stdout + done.stderr, "the CLI's error")
    assert secure.password("operator") not in done.stderr
