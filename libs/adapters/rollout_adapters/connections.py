"""Clients from the shared connection settings: the Kafka bus and the Redis store of a service.

`rollout_common.connection_settings` describes the connection (and may not touch a client
library); here it becomes aiokafka options, an SSL context, and redis-py arguments.
"""

from __future__ import annotations

import ssl
from typing import Any

from aiokafka.helpers import create_ssl_context  # type: ignore[import-untyped]

from rollout_adapters.kafka_bus import ConsumerOptions, KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.connection_settings import KafkaSecurity, RedisServiceSettings, ServiceSettings


def ssl_context(security: KafkaSecurity) -> ssl.SSLContext:
    """The TLS context for SSL / SASL_SSL: the CA file if given (else the system's), client cert if given."""
    context: ssl.SSLContext = create_ssl_context(
        cafile=security.ssl_cafile, certfile=security.ssl_certfile, keyfile=security.ssl_keyfile
    )
    if security.ssl_cafile is None:
        context.load_default_certs()
    context.check_hostname = security.ssl_check_hostname
    return context


def kafka_security_options(security: KafkaSecurity) -> dict[str, Any]:
    """The aiokafka client arguments for `security` (the `security=` mapping of `KafkaBus`)."""
    options: dict[str, Any] = {"security_protocol": security.security_protocol.value}
    if security.uses_ssl:
        options["ssl_context"] = ssl_context(security)
    if security.uses_sasl:
        assert security.sasl_password is not None  # the model's validator guarantees it
        options["sasl_mechanism"] = security.sasl_mechanism.value
        options["sasl_plain_username"] = security.sasl_username
        options["sasl_plain_password"] = security.sasl_password.get_secret_value()
    return options


def kafka_bus(
    settings: ServiceSettings, *, client_id: str, consumer_options: ConsumerOptions | None = None
) -> KafkaBus:
    """The service's bus: its bootstrap servers, security and replication factor."""
    return KafkaBus(
        settings.kafka_bootstrap,
        client_id=client_id,
        security=kafka_security_options(settings.kafka_security),
        replication_factor=settings.kafka_replication_factor,
        min_insync_replicas=settings.kafka_min_insync_replicas,
        consumer_options=consumer_options,
    )


def redis_store(settings: RedisServiceSettings) -> RedisStore:
    """The service's store: URL, then username/password/CA fields over what the URL says; through
    the Sentinels when they are set, waiting for replicas' confirmations when that is set."""
    password = settings.redis_password.get_secret_value() if settings.redis_password is not None else None
    return RedisStore(
        settings.redis_url,
        namespace=settings.redis_namespace,
        username=settings.redis_username,
        password=password,
        ssl_ca_certs=str(settings.redis_ssl_ca_certs) if settings.redis_ssl_ca_certs is not None else None,
        sentinels=settings.sentinel_addresses,
        sentinel_service=settings.redis_sentinel_service,
        replica_acks=settings.redis_replica_acks,
        replica_ack_timeout_ms=settings.redis_replica_ack_timeout_ms,
    )


__all__ = ["kafka_bus", "kafka_security_options", "redis_store", "ssl_context"]
