"""A dashboard app on a free localhost port for the duration of a test, fed by the test itself."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rollout_adapters.web_dashboard import DashboardAccess, Feed, dashboard_app
from rollout_adapters.web_dashboard.thread_site import ThreadSite, url_of


@contextmanager
def served(feed: Feed, *, title: str = "rollout test", access: DashboardAccess | None = None) -> Iterator[str]:
    site = ThreadSite(dashboard_app(feed.current, title=title, access=access), host="127.0.0.1", port=0)
    port = site.start()
    try:
        yield url_of("127.0.0.1", port)
    finally:
        site.stop()
