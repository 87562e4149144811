"""Settings every service shares: where Kafka and Redis are, how to authenticate, how to load them.

Environment variables carry the `ROLLOUT_` prefix and `__` between nested names:

- `ROLLOUT_KAFKA_BOOTSTRAP`, `ROLLOUT_KAFKA_REPLICATION_FACTOR`, `ROLLOUT_KAFKA_MIN_INSYNC_REPLICAS`,
  `ROLLOUT_CREATE_TOPICS`, `ROLLOUT_TOPIC_PREFIX`, `ROLLOUT_TOPIC_PARTITIONS` (JSON, by catalog name),
  `ROLLOUT_LOG_LEVEL`;
- `ROLLOUT_KAFKA_SECURITY__SECURITY_PROTOCOL` (PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL),
  `ROLLOUT_KAFKA_SECURITY__SASL_MECHANISM` (PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512),
  `ROLLOUT_KAFKA_SECURITY__SASL_USERNAME`, `ROLLOUT_KAFKA_SECURITY__SASL_PASSWORD`,
  `ROLLOUT_KAFKA_SECURITY__SSL_CAFILE`, `ROLLOUT_KAFKA_SECURITY__SSL_CERTFILE`,
  `ROLLOUT_KAFKA_SECURITY__SSL_KEYFILE`, `ROLLOUT_KAFKA_SECURITY__SSL_CHECK_HOSTNAME`;
- `ROLLOUT_REDIS_URL` (`rediss://` for TLS), `ROLLOUT_REDIS_USERNAME`, `ROLLOUT_REDIS_PASSWORD`,
  `ROLLOUT_REDIS_SSL_CA_CERTS`, `ROLLOUT_REDIS_NAMESPACE`, `ROLLOUT_REDIS_SENTINELS`,
  `ROLLOUT_REDIS_SENTINEL_SERVICE`, `ROLLOUT_REDIS_REPLICA_ACKS`, `ROLLOUT_REDIS_REPLICA_ACK_TIMEOUT_MS`
  (services that use Redis).

Passwords are `SecretStr`: their repr and `str` show `**********`, and `loggable()` is the form of
a settings object that may be logged (secrets and URL passwords masked). The clients are built
from these models in `rollout_adapters.connections`; this module stays free of I/O.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rollout_common.errors import InvalidInputError
from rollout_common.ports import TopicSpec
from rollout_common.topics.catalog import TopicDef
from rollout_common.topics.partitions import checked_overrides, partitions_of

MASK = "**********"


S = TypeVar("S", bound="ServiceSettings")


class SecurityProtocol(str, Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(str, Enum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class KafkaSecurity(BaseModel):
    """How every Kafka client of a service connects: plain, TLS, SASL, or SASL over TLS."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism = Field(
        default=SaslMechanism.PLAIN, description="with SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"
    )
    sasl_username: str | None = None
    sasl_password: SecretStr | None = Field(default=None, description="secret: never logged")
    ssl_cafile: Path | None = Field(default=None, description="CA bundle the broker certificates are checked against")
    ssl_certfile: Path | None = Field(default=None, description="client certificate (mutual TLS)")
    ssl_keyfile: Path | None = Field(default=None, description="client private key (mutual TLS)")
    ssl_check_hostname: bool = Field(default=True, description="check the broker's name against its certificate")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        if self.uses_sasl and (not self.sasl_username or self.sasl_password is None):
            raise ValueError(f"{self.security_protocol.value} needs sasl_username and sasl_password")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_certfile and ssl_keyfile go together (mutual TLS)")
        return self


class ServiceSettings(BaseSettings):
    """The Kafka part, the log level and the loading rules every service's settings share.

    The environment wins over a config file (whose values arrive as init arguments): one file
    can serve several processes that differ in a variable or two.
    """

    model_config = SettingsConfigDict(env_prefix="ROLLOUT_", env_nested_delimiter="__", extra="forbid", frozen=True)

    kafka_bootstrap: str = "localhost:9092"
    kafka_security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    kafka_replication_factor: int = Field(
        default=1, ge=1, description="of the topics this service creates (3 on a cluster of three or more brokers)"
    )
    kafka_min_insync_replicas: int = Field(
        default=1,
        ge=1,
        description="min.insync.replicas of the topics this service creates (2 with replication factor 3): "
        "an acks=all write is refused, not kept on fewer replicas",
    )
    create_topics: bool = Field(default=True, description="create missing topics at start (idempotent)")
    topic_prefix: str = Field(
        default="",
        description="put before every catalog topic name and consumer group id (one broker, several systems)",
    )
    topic_partitions: dict[str, int] = Field(
        default_factory=dict,
        description="partitions of catalog topics by name where not the catalog's default, e.g. "
        '{"rollout.cluster-heartbeats": 32}: the same in every service of a deployment (docs/operations.md, sizing)',
    )
    log_level: str = "INFO"

    @field_validator("topic_partitions")
    @classmethod
    def _known_topics(cls, value: dict[str, int]) -> dict[str, int]:
        return checked_overrides(value)

    def partitions(self, topic: TopicDef) -> int:
        """How many partitions `topic` has in this deployment."""
        return partitions_of(topic, self.topic_partitions)

    def topic_spec(self, topic: TopicDef) -> TopicSpec:
        """`topic` as this deployment creates it: under the prefix, with its configured partitions."""
        return topic.spec(self.topic_prefix, partitions=self.partitions(topic))

    def group(self, name: str) -> str:
        """A consumer group id under the topic prefix, so two deployments sharing a broker never share a
        group. A name that already starts with the prefix is kept as it is."""
        return name if name.startswith(self.topic_prefix) else self.topic_prefix + name

    @model_validator(mode="after")
    def _replicas_consistent(self) -> ServiceSettings:
        if self.kafka_min_insync_replicas > self.kafka_replication_factor:
            raise ValueError("kafka_min_insync_replicas may not exceed kafka_replication_factor")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return env_settings, init_settings

    def __repr_args__(self) -> Any:
        # SecretStr fields mask themselves; a password inside a URL (redis://:pw@host) must too.
        for name, value in super().__repr_args__():
            yield name, masked_url(value) if isinstance(value, str) and "://" in value else value


class RedisServiceSettings(ServiceSettings):
    """ServiceSettings and Redis, for the services that keep state there (planner, executor)."""

    redis_url: str = Field(default="redis://localhost:6379/0", description="rediss:// for TLS")
    redis_username: str | None = Field(default=None, description="ACL user (overrides one in the URL)")
    redis_password: SecretStr | None = Field(default=None, description="secret: never logged; overrides the URL's")
    redis_ssl_ca_certs: Path | None = Field(default=None, description="CA bundle for a rediss:// server")
    redis_namespace: str = Field(default="rollout", description="prefix of every Redis key this service writes")
    redis_sentinels: str = Field(
        default="",
        description="comma-separated host:port of the Sentinels; when set, the primary of redis_sentinel_service is "
        "asked of them and followed through a failover (redis_url then gives only the database and credentials)",
    )
    redis_sentinel_service: str = Field(default="rollout", description="the name the Sentinels monitor the primary by")
    redis_replica_acks: int = Field(
        default=0,
        ge=0,
        description="replicas that must confirm each write (WAIT) before it counts as done; 1 with Sentinel keeps a "
        "failover from losing a journalled batch or a lease, at one replication round trip per write, and "
        "stops writes while no replica is in sync",
    )
    redis_replica_ack_timeout_ms: int = Field(
        default=1000, ge=1, description="how long a write waits for redis_replica_acks before it counts as failed"
    )

    @property
    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """`redis_sentinels` as (host, port) pairs."""
        pairs = []
        for item in filter(None, (part.strip() for part in self.redis_sentinels.split(","))):
            host, _, port = item.rpartition(":")
            pairs.append((host, int(port)))
        return pairs

    @model_validator(mode="after")
    def _sentinels_readable(self) -> RedisServiceSettings:
        for item in filter(None, (part.strip() for part in self.redis_sentinels.split(","))):
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"redis_sentinels: {item!r} is not host:port")
        return self


def masked_url(url: str) -> str:
    """`url` with any password replaced by the mask, fit for a log line."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def loggable(settings: BaseModel) -> dict[str, Any]:
    """The settings as JSON-ready data with every secret masked (SecretStr and URL passwords)."""
    masked: dict[str, Any] = _masked(settings.model_dump(mode="json"), settings)
    return masked


def _masked(data: Any, model: Any) -> Any:
    if isinstance(data, dict):
        return {key: _masked(value, getattr(model, key, None)) for key, value in data.items()}
    if isinstance(model, SecretStr):
        return MASK
    if isinstance(data, str) and "://" in data:
        return masked_url(data)
    return data


def read_config_file(path: Path | None) -> dict[str, Any]:
    """A YAML (or JSON) mapping of settings, or nothing; a broken file is an InvalidInputError."""
    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInputError(f"config file {path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise InvalidInputError(f"config file {path}: not valid YAML or JSON: {exc}") from exc
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidInputError(f"config file {path}: expected a mapping of settings")
    return loaded


def load(model: type[S], config_file: Path | None = None, *, what: str = "settings") -> S:
    """`model` from the file's values overridden by the environment; any problem is one InvalidInputError.

    The message names fields and problems only, never the values given (which may be secrets).
    """
    values = read_config_file(config_file)
    try:
        return model(**values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'settings'}: {e['msg']}" for e in exc.errors())
        raise InvalidInputError(f"{what}: {problems}") from exc


__all__ = [
    "MASK",
    "KafkaSecurity",
    "RedisServiceSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "ServiceSettings",
    "load",
    "loggable",
    "masked_url",
    "read_config_file",
]
