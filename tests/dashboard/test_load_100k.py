"""The page at 100,000 clusters: what it costs to load, and the filter and pager over the whole fleet.

The snapshot comes from the simulator (the demo fleet scaled to 100,000 with hundreds of failed
upgrades), so the status document and the attention list are what the planner would serve. The
figures go to build/dashboard-screenshots/load-100k.json and the test output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fleet_100k
import pytest
from playwright.sync_api import Page, expect
from served import served

from rollout_adapters.web_dashboard import ClusterRow, Feed

# bounds with room for a busy shared machine; the figures themselves are in the report
MAX_HTML_BYTES = 100_000
MAX_TOTAL_BYTES = 250_000
MAX_LOAD_MS = 5_000
PAGE_ROWS = 50

_TIMING = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const resources = performance.getEntriesByType("resource").map((r) => ({name: r.name, bytes: r.encodedBodySize}));
  return {
    ttfbMs: nav.responseStart - nav.requestStart,
    domContentLoadedMs: nav.domContentLoadedEventEnd - nav.startTime,
    loadMs: nav.loadEventEnd - nav.startTime,
    htmlBytes: nav.encodedBodySize,
    resources,
  };
}"""


@pytest.fixture(scope="module")
def fleet() -> tuple[dict[str, Any], list[ClusterRow]]:
    return fleet_100k.snapshot()


@pytest.fixture
def url(fleet: tuple[dict[str, Any], list[ClusterRow]]) -> Iterator[str]:
    feed = Feed()
    feed.publish(*fleet)
    with served(feed, title="rollout · 100,000 clusters") as address:
        yield address


def test_page_loads_small_and_fast_at_100k_clusters(
    page: Page, url: str, fleet: tuple[dict[str, Any], list[ClusterRow]], screenshots: Path
) -> None:
    doc, rows = fleet
    assert doc["clusters"] == fleet_100k.CLUSTERS
    page.goto(url, wait_until="load")
    expect(page.locator("#cluster-rows tr")).to_have_count(PAGE_ROWS)
    page.wait_for_function("() => performance.getEntriesByType('resource').some((r) => r.name.includes('/api/'))")
    timing = page.evaluate(_TIMING)
    total = timing["htmlBytes"] + sum(r["bytes"] for r in timing["resources"])
    report = {
        "clusters": doc["clusters"],
        "attentionRows": len(rows),
        "statusJsonBytes": len(json.dumps(doc, default=str)),
        **{key: round(value, 1) for key, value in timing.items() if key != "resources"},
        "resources": timing["resources"],
        "totalBytes": total,
        "domRows": page.locator("tr").count(),
    }
    (screenshots / "load-100k.json").write_text(json.dumps(report, indent=2))
    page.screenshot(path=str(screenshots / "load-100k.png"), full_page=True)
    print(json.dumps(report, indent=2))
    assert timing["htmlBytes"] < MAX_HTML_BYTES
    assert total < MAX_TOTAL_BYTES
    assert timing["loadMs"] < MAX_LOAD_MS
    assert report["domRows"] < 200  # paged: never a row per cluster


def test_filter_and_pager_work_over_the_whole_fleet(
    page: Page, url: str, fleet: tuple[dict[str, Any], list[ClusterRow]]
) -> None:
    _, rows = fleet
    total = len(rows)
    failed_prod_10 = sum(1 for r in rows if "prod-10" in r.name and r.kind == "FAILED")
    assert total > PAGE_ROWS * 2 and 0 < failed_prod_10 < total
    page.goto(url)
    count = page.locator("#cluster-count")
    expect(count).to_have_text(f"1-{PAGE_ROWS} of {total} matching ({total} need attention)")
    page.click("#next-page")
    expect(count).to_have_text(f"{PAGE_ROWS + 1}-{2 * PAGE_ROWS} of {total} matching ({total} need attention)")
    started = time.perf_counter()
    page.fill('input[name="name"]', "prod-10")
    page.select_option('select[name="status"]', "FAILED")
    page.select_option('select[name="stage"]', "prod")
    page.fill('input[name="label"]', "env=prod")
    shown = min(PAGE_ROWS, failed_prod_10)
    expect(count).to_have_text(f"1-{shown} of {failed_prod_10} matching ({total} need attention)")
    print(f"filter over {total} attention rows of 100,000 clusters answered in {time.perf_counter() - started:.2f} s")
    names = page.locator("#cluster-rows th").all_text_contents()
    assert len(names) == shown and all("prod-10" in name for name in names)
    page.fill('input[name="label"]', "env=staging")
    expect(count).to_have_text(f"0-0 of 0 matching ({total} need attention)")
