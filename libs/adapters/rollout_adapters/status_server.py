"""`/healthz`, `/readyz` and `/metrics` over HTTP (aiohttp, which faust already brings).

The planner's server also serves the read-only web dashboard (`rollout_adapters.web_dashboard`)
when given one, on an address of its own.

The one probe and metrics server of every service (planner, executor, health reporter and
monitor): liveness and readiness are what the service's callables say, metrics are a
Prometheus registry's exposition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def _always() -> bool:
    return True


@dataclass(frozen=True, slots=True)
class DashboardSite:
    """The web dashboard's app and where it listens: its own address, localhost unless configured,
    so the probes can bind every interface without exposing the dashboard with them."""

    app: web.Application
    host: str
    port: int


class StatusServer:
    """Liveness defaults to "the loop answers"; readiness is whatever `ready` says."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        ready: Callable[[], bool],
        registry: CollectorRegistry | None = None,
        metrics: Callable[[], bytes] | None = None,
        healthy: Callable[[], bool] = _always,
        dashboard: DashboardSite | None = None,
    ) -> None:
        if (registry is None) == (metrics is None):
            raise ValueError("give either a registry or a metrics callable")
        self._host = host
        self._port = port
        self._registry = registry
        self._metrics_body = metrics or self._exposition
        self._ready = ready
        self._healthy = healthy
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self._dashboard = dashboard
        self._dashboard_runner: web.AppRunner | None = None
        self.dashboard_port: int | None = None

    async def start(self) -> int:
        """Listen; returns the bound port (the one chosen when asked for port 0)."""
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self.port = int(self._runner.addresses[0][1])
        if self._dashboard is not None:
            self._dashboard_runner = web.AppRunner(self._dashboard.app, access_log=None)
            await self._dashboard_runner.setup()
            await web.TCPSite(self._dashboard_runner, self._dashboard.host, self._dashboard.port).start()
            self.dashboard_port = int(self._dashboard_runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        for runner in (self._dashboard_runner, self._runner):
            if runner is not None:
                await runner.cleanup()
        self._runner = self._dashboard_runner = None

    def _exposition(self) -> bytes:
        assert self._registry is not None
        return generate_latest(self._registry)

    async def _healthz(self, _: web.Request) -> web.Response:
        return _closing(
            web.Response(text="ok\n") if self._healthy() else web.Response(status=503, text="not healthy\n")
        )

    async def _readyz(self, _: web.Request) -> web.Response:
        return _closing(web.Response(text="ready\n") if self._ready() else web.Response(status=503, text="not ready\n"))

    async def _metrics(self, _: web.Request) -> web.Response:
        return _closing(web.Response(body=self._metrics_body(), headers={"Content-Type": CONTENT_TYPE_LATEST}))


def _closing(response: web.Response) -> web.Response:
    # One request per connection: probes and scrapes reconnect anyway, and a client reading to
    # the end of the stream (no keep-alive support) gets its answer.
    response.force_close()
    return response


__all__ = ["DashboardSite", "StatusServer"]
