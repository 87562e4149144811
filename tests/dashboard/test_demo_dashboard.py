"""The web dashboard of `rollout demo`, in a real browser, while the demo rollout runs (STAT-2..5).

The page is loaded once, near the start; everything after that arrives through its live updates
(the test checks that the page was never reloaded). Screenshots go to build/dashboard-screenshots.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from demo_process import running_demo
from playwright.sync_api import Page, expect

# slow enough that the GATE-3 hold of staging lasts several of the page's 2 s polls
SPEED = "200"
WAIT_MS = 90_000


def _status(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url + "api/status", timeout=10) as response:
        doc: dict[str, object] = json.load(response)
        return doc


def test_demo_dashboard_shows_the_gate_3_hold_and_follows_the_rollout_live(
    page: Page, tmp_path: Path, screenshots: Path
) -> None:
    """STAT-5: the GATE-3 wait of staging with its numbers, as `rollout status` words it; STAT-3 partitions;
    the page moves on by itself (ETag'd polling), no reload."""
    with running_demo(tmp_path, "--speed", SPEED) as url:
        page.goto(url)
        expect(page.locator("li.stage h3")).to_have_text(["test", "staging", "prod"])
        expect(page.locator("#as-of")).to_contain_text("As of 2026-01-05")  # the scenario's own clock
        first_etag = page.locator("main").get_attribute("data-etag")
        page.evaluate("window.loadedOnce = 'yes'")  # gone if the page were reloaded

        gate_3 = page.locator('tr.wait[data-rule="GATE-3"]')
        expect(gate_3).to_have_count(1, timeout=WAIT_MS)
        page.screenshot(path=str(screenshots / "demo-staging-waits-on-gate-3.png"), full_page=True)
        expect(gate_3.locator("th")).to_have_text("staging/controlPlane")
        expect(gate_3).to_contain_text(
            "1 earlier partition(s) NotReady (canary) > maxUnavailablePartitions 0; "
            "partition rest and later ones wait (GATE-3)"
        )
        expect(gate_3).to_contain_text("notReadyPartitions 1, maxUnavailablePartitions 0")
        staging = page.locator('li.stage[data-stage="staging"] div.track[data-track="controlPlane"] .badge')
        expect(staging).to_have_text("IN_PROGRESS")
        canary = page.locator('table.partitions[data-stage="staging"] tbody tr').first
        expect(canary.locator("th")).to_have_text("canary")
        expect(canary.locator("td").nth(0)).to_have_text("6")  # size
        expect(canary.locator("td").nth(1)).to_have_text("0")  # resolved maxUnavailable
        expect(canary.locator("td").nth(3)).to_contain_text("NotReady")
        assert page.locator("main").get_attribute("data-etag") != first_etag
        assert page.evaluate("window.loadedOnce") == "yes"

        prod_cp = page.locator('li.stage[data-stage="prod"] div.track[data-track="controlPlane"] .badge')
        expect(prod_cp).to_have_text("IN_PROGRESS", timeout=WAIT_MS)
        page.screenshot(path=str(screenshots / "demo-middle.png"), full_page=True)
        expect(page.locator('li.stage[data-stage="test"] .badge')).to_have_text(["COMPLETE", "COMPLETE"])
        rows = page.locator('table.partitions[data-stage="prod"] tbody tr')
        stages = _status(url)["stages"]
        assert isinstance(stages, list)
        planned = stages[2]["tracks"]["controlPlane"]["partitions"]
        expect(rows).to_have_count(len(planned))
        for row, partition in zip(rows.all(), planned, strict=True):
            expect(row.locator("td").nth(0)).to_have_text(str(partition["clusters"]))
            expect(row.locator("td").nth(1)).to_have_text(str(partition["maxUnavailable"]))
        expect(page.locator("#timeline rect.bar")).not_to_have_count(0)
        assert page.evaluate("window.loadedOnce") == "yes"


def test_demo_dashboard_narrow_screen(browser: object, tmp_path: Path, screenshots: Path) -> None:
    """At 390 px wide the pipeline stacks and nothing needs sideways scrolling of the page itself."""
    from playwright.sync_api import Browser

    assert isinstance(browser, Browser)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = context.new_page()
        with running_demo(tmp_path, "--speed", "0") as url:
            page.goto(url)
            expect(page.locator("li.stage")).to_have_count(3)
            expect(page.locator("#as-of")).not_to_contain_text("1970")  # the scenario clock, even before it starts
            page.screenshot(path=str(screenshots / "demo-narrow.png"), full_page=True)
            overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            assert overflow <= 0
            boxes = [page.locator("li.stage").nth(i).bounding_box() for i in range(3)]
            assert all(box is not None and box["width"] <= 390 for box in boxes)
            assert boxes[0] is not None and boxes[1] is not None and boxes[1]["y"] > boxes[0]["y"]  # stacked
    finally:
        context.close()
