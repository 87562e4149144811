"""The planner's snapshots for the web dashboard: its status document and attention rows, rebuilt lazily.

Rebuilt when a page asks and the planner has decided a new batch since, at most every
`REFRESH_S`, and never more often than `BUSY_SHARE` of the time: walking a 100,000-cluster fleet
takes about a second of the planner's event loop, which must stay free for deciding batches.
"""

from __future__ import annotations

import time

from rollout_adapters.status_server import DashboardSite
from rollout_adapters.web_dashboard import DashboardAccess, Feed, Snapshot, dashboard_app
from rollout_common.errors import PermanentError
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.planner import Planner
from rollout_planner.service.settings import PlannerSettings
from rollout_planner.service.status_document import status_document

REFRESH_S = 2.0
# rebuilding may take at most this share of the planner's time (a 1 s rebuild: once every 10 s)
BUSY_SHARE = 0.1


class PlannerFeed:
    def __init__(self, planner: Planner) -> None:
        self._planner = planner
        self._feed = Feed()
        self._batch = -1
        self._built = float("-inf")
        self._interval = REFRESH_S

    def current(self) -> Snapshot:
        batch = self._planner.checkpoint.batch
        wall = time.monotonic()
        if batch != self._batch and wall - self._built >= self._interval:
            try:
                state = self._planner.state
            except PermanentError:  # not started yet: nothing to show
                return self._feed.current()
            self._feed.publish(status_document(state, batch=batch), attention_rows(state))
            took = time.monotonic() - wall
            self._batch, self._built = batch, wall
            self._interval = max(REFRESH_S, took / BUSY_SHARE)
        return self._feed.current()


def dashboard_site(settings: PlannerSettings, planner: Planner) -> DashboardSite | None:
    if not settings.dashboard_port:
        return None
    access = DashboardAccess(
        token=settings.dashboard_token, username=settings.dashboard_username, password=settings.dashboard_password
    )
    app = dashboard_app(PlannerFeed(planner).current, title="rollout planner", access=access)
    return DashboardSite(app=app, host=settings.dashboard_host, port=settings.dashboard_port)


__all__ = ["BUSY_SHARE", "REFRESH_S", "PlannerFeed", "dashboard_site"]
