"""The read-only web dashboard: the planner's status document as a page, its JSON as an API.

Served by the planner's status server (`StatusServer(dashboard=...)`) and by `rollout demo`. The
page is rendered on the server (every value escaped); a small script polls the ETag'd JSON and
swaps in fresh server-rendered sections, and pages through the clusters needing attention.
"""

from rollout_adapters.web_dashboard.app import DashboardAccess, dashboard_app
from rollout_adapters.web_dashboard.feed import ClusterRow, Feed, Snapshot

__all__ = ["ClusterRow", "DashboardAccess", "Feed", "Snapshot", "dashboard_app"]
