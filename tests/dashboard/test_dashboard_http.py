"""The dashboard's HTTP surface: read-only, strict CSP, optional auth, ETags, paging (safe by default)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from served import served

from rollout_adapters.web_dashboard import ClusterRow, DashboardAccess, Feed
from rollout_adapters.web_dashboard.app import CSP
from rollout_cli.demo_scenario import builtin_scenario
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.settings import PlannerSettings
from rollout_planner.service.status_document import status_document
from rollout_planner.simulation.runner import Simulator

ROUTES = ("/", "/api/status", "/api/clusters", "/fragments/live", "/static/dashboard.js", "/static/dashboard.css")
TOKEN = "s3cret-token-value"


def _request(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, Any, bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


@pytest.fixture(scope="module")
def feed() -> Feed:
    """The demo fleet two hours in: staging held by GATE-3, stg-canary-2 offline."""
    sim = Simulator(builtin_scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= 3900:
        sim.step()
    built = Feed()
    built.publish(status_document(sim.state, batch=7), attention_rows(sim.state))
    return built


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_sends_a_strict_content_security_policy(feed: Feed, route: str) -> None:
    with served(feed) as url:
        status, headers, _ = _request(url.rstrip("/") + route)
    assert status == 200
    assert headers["Content-Security-Policy"] == CSP
    assert "unsafe-inline" not in CSP and "script-src 'self'" in CSP and "style-src 'self'" in CSP
    assert headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("route", ROUTES)
def test_no_route_accepts_a_change(feed: Feed, route: str, method: str) -> None:
    with served(feed) as url:
        status, headers, _ = _request(url.rstrip("/") + route, method=method)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert headers["Content-Security-Policy"] == CSP


def test_status_json_is_the_planner_document_with_an_etag(feed: Feed) -> None:
    with served(feed) as url:
        status, headers, body = _request(url + "api/status")
        again, _, empty = _request(url + "api/status", headers={"If-None-Match": headers["ETag"]})
    assert status == 200
    assert json.loads(body) == json.loads(json.dumps(feed.current().doc, default=str))
    assert headers["ETag"] == '"1"'
    assert (again, empty) == (304, b"")


def test_clusters_are_filtered_and_paged_on_the_server(feed: Feed) -> None:
    with served(feed) as url:
        _, _, body = _request(url + "api/clusters?status=OFFLINE&stage=staging&label=canary=true&name=canary-2")
        _, _, none = _request(url + "api/clusters?status=FAILED")
        bad, _, problem = _request(url + "api/clusters?limit=100000")
    page = json.loads(body)
    assert (page["total"], page["matched"]) == (1, 1)
    assert page["clusters"][0] == {
        "name": "stg-canary-2",
        "kind": "OFFLINE",
        "status": "PENDING",
        "detail": "reported not ready with no upgrade under way",
        "stage": "staging",
        "partition": "canary",
        "labels": {"env": "staging", "canary": "true"},
    }
    assert json.loads(none)["matched"] == 0
    assert bad == 400 and "limit" in json.loads(problem)["error"]


def test_bearer_token_is_required_when_set_and_never_shown() -> None:
    feed = Feed()
    feed.publish({"now": 0.0, "stages": [], "rollouts": []}, [])
    with served(feed, access=DashboardAccess(token=TOKEN)) as url:
        refused, headers, _ = _request(url)
        wrong, _, _ = _request(url, headers={"Authorization": "Bearer nope"})
        ok, _, page = _request(url, headers={"Authorization": f"Bearer {TOKEN}"})
        api, _, _ = _request(url + "api/status", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (refused, wrong, ok, api) == (401, 401, 200, 200)
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN.encode() not in page


def test_basic_auth_is_required_when_a_password_is_set() -> None:
    feed = Feed()
    feed.publish({"now": 0.0, "stages": [], "rollouts": []}, [])
    access = DashboardAccess(username="oncall", password="pa:ss")
    good = base64.b64encode(b"oncall:pa:ss").decode()
    bad = base64.b64encode(b"oncall:wrong").decode()
    with served(feed, access=access) as url:
        refused, headers, _ = _request(url)
        wrong, _, _ = _request(url, headers={"Authorization": f"Basic {bad}"})
        garbage, _, _ = _request(url, headers={"Authorization": "Basic %%%"})
        ok, _, page = _request(url, headers={"Authorization": f"Basic {good}"})
    assert (refused, wrong, garbage, ok) == (401, 401, 401, 200)
    assert headers["WWW-Authenticate"] == 'Basic realm="rollout dashboard"'
    assert b"pa:ss" not in page


def test_the_planner_dashboard_is_off_by_default_and_binds_localhost_when_on() -> None:
    settings = PlannerSettings()
    assert settings.dashboard_port == 0
    assert settings.dashboard_host == "127.0.0.1"
    assert settings.dashboard_token is None and settings.dashboard_password is None


def test_clusters_page_stays_small_when_all_100k_clusters_need_attention() -> None:
    """Worst case of the attention list: every one of 100,000 clusters in it; a page is still 50 rows."""
    rows = [
        ClusterRow(
            name=f"c-{i:06d}",
            kind="FAILED" if i % 3 == 0 else "OFFLINE",
            status="FAILED" if i % 3 == 0 else "PENDING",
            detail="x",
            stage=f"s{i % 4}",
            partition=None,
            labels={"zone": f"z{i % 10}"},
        )
        for i in range(100_000)
    ]
    feed = Feed()
    feed.publish({"now": 0.0, "stages": [], "rollouts": []}, rows)
    with served(feed) as url:
        started = time.perf_counter()
        _, _, body = _request(url + "api/clusters?status=FAILED&stage=s0&label=zone=z0&name=c-01&offset=50")
        elapsed = time.perf_counter() - started
        _, _, first = _request(url + "api/clusters")
    page = json.loads(body)
    expected = [r.name for r in rows if r.kind == "FAILED" and r.stage == "s0" and r.labels["zone"] == "z0"]
    expected = [name for name in expected if "c-01" in name]
    assert (page["total"], page["matched"]) == (100_000, len(expected))
    assert [c["name"] for c in page["clusters"]] == expected[50:100]
    assert len(first) < 20_000 and len(json.loads(first)["clusters"]) == 50
    assert elapsed < 2.0, f"a filtered page of 100,000 rows took {elapsed:.2f} s"
