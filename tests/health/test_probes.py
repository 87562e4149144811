"""The simulated, command and http probes."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from rollout_adapters.memory_bus import MemoryBus
from rollout_common.events import UpgradeResult
from rollout_common.status import Track
from rollout_health.probes.command import CommandProbe
from rollout_health.probes.http import HttpProbe
from rollout_health.probes.port import ProbeResult
from rollout_health.probes.simulated import SimulatedProbe
from rollout_health.settings import (
    CommandProbeSettings,
    HttpProbeSettings,
    OfflineWindow,
    SimulatedProbeSettings,
)

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _result(cluster: str, outcome: str, track: Track = Track.NODES) -> UpgradeResult:
    return UpgradeResult.model_validate(
        {"commandId": "cmd", "cluster": cluster, "track": track, "version": "1.31.2", "outcome": outcome}
    )


async def test_simulated_follows_upgrades_and_settles_after_success() -> None:
    clock = FakeClock()
    settings = SimulatedProbeSettings(ready_after_s=100, time_scale=0.1)
    probe = SimulatedProbe(settings, bus=MemoryBus(), clock=clock)
    assert (await probe.check("c1")).ready
    probe.apply(_result("c1", "started"), at=1000)
    assert await probe.check("c1") == ProbeResult(ready=False, detail="nodes upgrading")
    probe.apply(_result("c1", "succeeded"), at=1001)
    clock.now = 1005
    assert (await probe.check("c1")).detail == "settling after an upgrade"
    clock.now = 1011.5  # 1001 + 100 * 0.1
    assert (await probe.check("c1")).ready
    probe.apply(_result("c2", "failed", Track.CONTROL_PLANE), at=1010)
    result = await probe.check("c2")
    assert not result.ready and result.detail is not None and "controlPlane upgrade failed" in result.detail


async def test_simulated_scripted_outage_is_scaled() -> None:
    clock = FakeClock()
    settings = SimulatedProbeSettings(time_scale=0.1, offline={"c3": OfflineWindow(from_s=10, until_s=20)})
    probe = SimulatedProbe(settings, bus=MemoryBus(), clock=clock)
    assert (await probe.check("c3")).ready
    clock.now += 1.5
    assert (await probe.check("c3")).detail == "scripted offline"
    clock.now += 1.0
    assert (await probe.check("c3")).ready


def _command(code: str) -> CommandProbe:
    return CommandProbe(CommandProbeSettings(executable=sys.executable, args=("-c", code)))


async def test_command_probe_exit_code_decides(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ready = _command(f"import sys; open({str(marker)!r}, 'w').write(sys.argv[1])")
    assert (await ready.check("c1")).ready
    assert marker.read_text() == "c1"
    failing = await _command("import sys; print('api down', file=sys.stderr); sys.exit(2)").check("c1")
    assert (failing.ready, failing.detail) == (False, "exit code 2: api down")
    marker.unlink()
    rejected = await ready.check("c1; touch /tmp/x")
    assert not rejected.ready and rejected.detail is not None and rejected.detail.startswith("rejected:")
    assert not marker.exists()


@pytest.fixture
async def readyz_server() -> AsyncIterator[str]:
    async def readyz(request: web.Request) -> web.Response:
        return web.Response(status=200 if request.match_info["cluster"] == "good" else 503)

    app = web.Application()
    app.router.add_get("/{cluster}/readyz", readyz)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_http_probe_2xx_is_ready(readyz_server: str) -> None:
    probe = HttpProbe(HttpProbeSettings(url_template=readyz_server + "/{cluster}/readyz", timeout_s=2))
    await probe.start()
    try:
        assert (await probe.check("good")).ready
        assert await probe.check("bad") == ProbeResult(ready=False, detail="HTTP 503")
        rejected = await probe.check("../etc")
        assert rejected.detail is not None and rejected.detail.startswith("rejected:")
    finally:
        await probe.close()
    unreachable = HttpProbe(HttpProbeSettings(url_template="http://127.0.0.1:9/{cluster}", timeout_s=2))
    await unreachable.start()
    try:
        result = await unreachable.check("good")
        assert not result.ready and result.detail is not None and result.detail.startswith("unreachable")
    finally:
        await unreachable.close()
