"""The planner's snapshots for the web dashboard: its status document and attention rows, rebuilt lazily.

Rebuilt when a page asks and the planner has decided a new batch since, at most every
`REFRESH_S`: walking a 100,000-cluster fleet takes a moment of the planner's event loop, and
pages poll every two seconds whatever the batch rate.
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


class PlannerFeed:
    def __init__(self, planner: Planner) -> None:
        self._planner = planner
        self._feed = Feed()
        self._batch = -1
        self._built = float("-inf")

    def current(self) -> Snapshot:
        batch = self._planner.checkpoint.batch
        wall = time.monotonic()
        if batch != self._batch and wall - self._built >= REFRESH_S:
            try:
                state = self._planner.state
            except PermanentError:  # not started yet: nothing to show
                return self._feed.current()
            self._feed.publish(status_document(state, batch=batch), attention_rows(state))
            self._batch, self._built = batch, wall
        return self._feed.current()


def dashboard_site(settings: PlannerSettings, planner: Planner) -> DashboardSite | None:
    if not settings.dashboard_port:
        return None
    access = DashboardAccess(
        token=settings.dashboard_token, username=settings.dashboard_username, password=settings.dashboard_password
    )
    app = dashboard_app(PlannerFeed(planner).current, title="rollout planner", access=access)
    return DashboardSite(app=app, host=settings.dashboard_host, port=settings.dashboard_port)


__all__ = ["REFRESH_S", "PlannerFeed", "dashboard_site"]
