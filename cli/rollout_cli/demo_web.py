"""The demo's web dashboard: served from a thread, fed a snapshot of the simulation now and then."""

from __future__ import annotations

import time

from rollout_adapters.web_dashboard import Feed, dashboard_app
from rollout_adapters.web_dashboard.thread_site import ThreadSite, url_of
from rollout_cli.demo_simulation import status_document
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.simulation.runner import Simulator

DASHBOARD_PORT = 8090
# the web dashboard gets a fresh snapshot at most this often (wall seconds): a 100,000-cluster fleet
# takes a noticeable moment to walk, the page polls every 2 s anyway
PUBLISH_SECONDS = 0.5


def start_dashboard(web: WebDashboard, *, host: str, port: int | None) -> str:
    """On the port asked for; by default on DASHBOARD_PORT, or any free one when another demo holds it."""
    if port is not None:
        return web.start(host=host, port=port)
    try:
        return web.start(host=host, port=DASHBOARD_PORT)
    except OSError:
        return web.start(host=host, port=0)


class WebDashboard:
    """The web dashboard of the demo: served from a thread, fed a snapshot of the simulation now and then."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.feed = Feed()
        self.site: ThreadSite | None = None
        self.port = 0
        self._published = float("-inf")

    def start(self, *, host: str, port: int) -> str:
        title = f"rollout demo · {self.sim.scenario.name} · {len(self.sim.state.clusters)} clusters"
        self.publish(force=True)
        self.site = ThreadSite(dashboard_app(self.feed.current, title=title), host=host, port=port)
        self.port = self.site.start()
        return url_of(host, self.port)

    def publish(self, *, force: bool = False) -> None:
        wall = time.monotonic()
        if force or wall - self._published >= PUBLISH_SECONDS:
            doc = status_document(self.sim)
            # before the first instant the engine's clock is unset: the page shows the scenario's start
            doc["now"] = max(float(doc["now"]), self.sim.origin)
            self.feed.publish(doc, attention_rows(self.sim.state))
            self._published = wall

    def stop(self) -> None:
        if self.site is not None:
            self.site.stop()
