"""The settings that put a service's store behind Sentinel and make it wait for a replica."""

from __future__ import annotations

import pytest

from rollout_common.connection_settings import RedisServiceSettings, load
from rollout_common.errors import InvalidInputError


def test_the_sentinels_are_read_as_host_port_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_REDIS_SENTINELS", "sentinel-0:26379, sentinel-1:26379,10.0.0.7:26380")
    monkeypatch.setenv("ROLLOUT_REDIS_SENTINEL_SERVICE", "rollout-prod")
    monkeypatch.setenv("ROLLOUT_REDIS_REPLICA_ACKS", "1")
    settings = load(RedisServiceSettings)
    assert settings.sentinel_addresses == [("sentinel-0", 26379), ("sentinel-1", 26379), ("10.0.0.7", 26380)]
    assert settings.redis_sentinel_service == "rollout-prod"
    assert settings.redis_replica_acks == 1
    assert settings.redis_replica_ack_timeout_ms == 1000


def test_no_sentinels_by_default_and_no_replica_waits() -> None:
    settings = RedisServiceSettings()
    assert settings.sentinel_addresses == []
    assert settings.redis_replica_acks == 0


def test_a_sentinel_without_a_port_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLOUT_REDIS_SENTINELS", "sentinel-0")
    with pytest.raises(InvalidInputError, match="redis_sentinels: 'sentinel-0' is not host:port"):
        load(RedisServiceSettings)
