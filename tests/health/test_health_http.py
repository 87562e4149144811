"""/healthz, /readyz and /metrics of the health reporter, on the shared status server."""

from __future__ import annotations

import aiohttp
import pytest

from rollout_adapters.memory_bus import MemoryBus
from rollout_adapters.status_server import StatusServer
from rollout_common.errors import TransientError
from rollout_common.topics.catalog import HEARTBEATS
from rollout_health.probes.port import ProbeResult
from rollout_health.reporter import Reporter

pytestmark = pytest.mark.asyncio(loop_scope="session")


class ReadyProbe:
    name = "ready"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def check(self, cluster: str) -> ProbeResult:
        return ProbeResult(ready=True)


class FlakyBus(MemoryBus):
    down = True

    async def publish(self, topic: str, **kwargs: object) -> None:  # type: ignore[override]
        if self.down:
            raise TransientError("broker unreachable")
        await super().publish(topic, **kwargs)  # type: ignore[arg-type]


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status, await response.text()


async def test_the_reporter_is_ready_once_its_heartbeats_reach_kafka() -> None:
    bus = FlakyBus()
    await bus.ensure_topics([HEARTBEATS.spec()])
    reporter = Reporter(bus=bus, probe=ReadyProbe(), clusters=["c1", "c2"], reporter_id="r1")
    server = StatusServer(host="127.0.0.1", port=0, registry=reporter.metrics.registry, ready=lambda: reporter.ready)
    port = await server.start()
    try:
        assert (await _get(port, "/healthz"))[0] == 200
        # The broker is unreachable: the heartbeats cannot be published, the round fails.
        assert await reporter.tick() == []
        assert (await _get(port, "/readyz"))[0] == 503
        bus.down = False
        assert len(await reporter.tick()) == 2
        assert (await _get(port, "/readyz"))[0] == 200
        status, body = await _get(port, "/metrics")
        assert status == 200
        assert 'rollout_health_heartbeats_published_total{ready="true"} 2.0' in body
        # a round sends every heartbeat at once, so both the broker refused are counted (the next
        # round retries them)
        assert "rollout_health_heartbeats_unpublished_total 2.0" in body
        assert (await _get(port, "/nothing"))[0] == 404
    finally:
        await server.stop()
        await bus.close()


async def test_an_unhealthy_service_answers_503() -> None:
    server = StatusServer(host="127.0.0.1", port=0, metrics=lambda: b"", ready=lambda: True, healthy=lambda: False)
    port = await server.start()
    try:
        assert (await _get(port, "/healthz"))[0] == 503
    finally:
        await server.stop()
