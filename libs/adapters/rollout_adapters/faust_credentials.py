"""faust's `broker_credentials` from the shared Kafka security settings (kept apart: importing
faust is slow, and only the health monitor needs it)."""

from __future__ import annotations

import faust

from rollout_adapters.connections import ssl_context
from rollout_common.connection_settings import KafkaSecurity


def broker_credentials(security: KafkaSecurity) -> faust.SASLCredentials | faust.SSLCredentials | None:
    """None for PLAINTEXT; SSL: the TLS context; SASL_*: user, password, mechanism (and TLS)."""
    if security.uses_sasl:
        assert security.sasl_password is not None  # the model's validator guarantees it
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.sasl_password.get_secret_value(),
            mechanism=security.sasl_mechanism.value,
            ssl_context=ssl_context(security) if security.uses_ssl else None,
        )
    if security.uses_ssl:
        return faust.SSLCredentials(ssl_context(security))
    return None


__all__ = ["broker_credentials"]
