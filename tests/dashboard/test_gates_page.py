"""The web dashboard on stage gates, in a real browser: which approval gate waits and since when, who
approved it when and why (CHK-1, STAT-5), and when a stage's start window opens (CHK-3)."""

from __future__ import annotations

from pathlib import Path

from check_status_doc import halted_by_a_check
from playwright.sync_api import Page, expect
from served import served

from rollout_adapters.web_dashboard import Feed
from rollout_planner.service.attention_rows import attention_rows
from rollout_planner.service.status_document import status_document
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _feed(scenario: str, *, until: float) -> Feed:
    sim = Simulator(load_scenario(SCENARIOS / scenario))
    sim.start()
    while (t := sim.next_time()) is not None and t <= until:
        sim.step()
    feed = Feed()
    feed.publish(status_document(sim.state, batch=1), attention_rows(sim.state))
    return feed


def test_chk_1_page_shows_each_gate_waiting_since_and_approved_by_whom(page: Page, screenshots: Path) -> None:
    """At 3d40m: alice approved prod's before gate at 2d (CAB-42); its after gate waits since the
    control planes' soak ended at 3d10m, the nodes' too since 3d40m, and the waits table says so with
    the instant as a date."""
    with served(_feed("chk1-approval-before-and-after.yaml", until=3 * 86400 + 40 * 60)) as url:
        page.goto(url)
        rows = page.locator("#gates tbody tr.gate")
        expect(rows).to_have_count(2)
        page.screenshot(path=str(screenshots / "gates-approval.png"), full_page=True)
        before = page.locator('tr.gate[data-stage="prod"][data-gate="before"]')
        expect(before).to_have_attribute("data-approval", "approved")
        expect(before.locator("td")).to_have_text(
            ["before", "main-1", "2026-01-06 00:10 UTC", "approved approved by alice at 2026-01-07 00:00 UTC: CAB-42"]
        )
        after = page.locator('tr.gate[data-stage="prod"][data-gate="after"]')
        expect(after).to_have_attribute("data-approval", "waiting")
        expect(after.locator("td")).to_have_text(
            ["after", "main-1", "2026-01-08 00:10 UTC", "waiting not approved yet, waiting 30m"]
        )
        wait = page.locator('tr.wait[data-rule="CHK-1"]')
        expect(wait.locator("th")).to_have_text(["prod/controlPlane", "prod/nodes"])
        for row in wait.all():
            expect(row).to_contain_text(
                "rollout main-1 waits for the after approval of stage prod, waiting since "
                "2026-01-08T00:10:00+00:00 (CHK-1)"
            )
            expect(row).to_contain_text("rollout main-1, gate after, since 2026-01-08 00:10 UTC")
        badge = page.locator('li.stage[data-stage="prod"] div.track[data-track="controlPlane"] .badge')
        expect(badge).to_have_text("AWAITING_APPROVAL")


def test_chk_3_page_says_when_the_start_window_opens(page: Page) -> None:
    """At 2h (its last step at 1h40m) the version waits at prod for Tuesday's 09:00 window: a CHK-3
    wait per track, and the next wake-up is that opening. A sequence without approval gates shows no
    gate table."""
    with served(_feed("chk3-weekly-start-window.yaml", until=2 * 3600)) as url:
        page.goto(url)
        waits = page.locator('tr.wait[data-rule="CHK-3"]')
        expect(waits.locator("th")).to_have_text(["prod/controlPlane", "prod/nodes"])
        for row in waits.all():
            expect(row).to_contain_text("rollout main-1 waits for the start window of stage prod (CHK-3)")
            expect(row).to_contain_text("until 2026-01-06 09:00 UTC (in 1d7h20m)")
        expect(page.locator("#next-wake")).to_have_text(
            "Next wake-up: 2026-01-06 09:00 UTC (in 1d7h20m), when the start window of prod/controlPlane opens "
            "(CHK-3, rollout main-1)"
        )
        expect(page.locator("#gates")).to_have_count(0)


def test_chk_4_page_says_which_clusters_the_budget_holds_and_until_when(page: Page) -> None:
    """At 1h p-01 (patch, upgraded 12h before the start) and p-02 (minor, 4 days before) wait PAUSED
    DISRUPTION_BUDGET: the CHK-4 wait names them and when the first budget ends, the cluster list says why."""
    with served(_feed("chk4-patch-and-minor-intervals.yaml", until=3600)) as url:
        page.goto(url)
        wait = page.locator('tr.wait[data-rule="CHK-4"]')
        expect(wait.locator("th")).to_have_text(["prod/controlPlane"])
        expect(wait).to_contain_text("clusters: p-01, p-02")
        expect(wait).to_contain_text("until 2026-01-05 12:00 UTC (in 11h19m)")  # its last step was at 41m
        expect(wait).to_contain_text("waiting 2, until 2026-01-05 12:00 UTC")
        expect(page.locator("#next-wake")).to_have_text(
            "Next wake-up: 2026-01-05 12:00 UTC (in 11h19m), when the disruption budget of p-01 (controlPlane) ends "
            "(CHK-4)"
        )
        page.select_option("#f-status", "PAUSED")
        rows = page.locator("#cluster-rows tr")
        expect(rows.locator("th")).to_have_text(["p-01", "p-02"])
        for row in rows.all():
            expect(row.locator("td").last).to_have_text("DISRUPTION_BUDGET")


def test_stat_2_page_says_why_a_stage_halted(page: Page) -> None:
    """STAT-2, STAT-5: prod's control planes halted at 10m on their second failed upgrade (maxFailures 2):
    the track's badge says PAUSED and its timing why, beside the OPS-1 wait."""
    with served(_feed("gate6-max-failures.yaml", until=3600)) as url:
        page.goto(url)
        track = page.locator('li.stage[data-stage="prod"] div.track[data-track="controlPlane"]')
        expect(track.locator(".badge")).to_have_text("PAUSED")
        expect(track.locator("dd").last).to_have_text("paused (FAILURE_BUDGET), running 10m")
        expect(page.locator('tr.wait[data-rule="OPS-1"]')).to_contain_text(
            "rollout paused (FAILURE_BUDGET); no new batches (OPS-1)"
        )


def test_chk_2_page_shows_each_checks_latest_value_against_its_condition_and_why_it_halted(page: Page) -> None:
    """CHK-2, STAT-5: error-rate's 0.07 failed twice in a row (limit 1) and halted the control planes
    (PAUSED, CHECK_FAILED); p99-latency passed; saturation has no result yet."""
    feed = Feed()
    feed.publish(halted_by_a_check(), [])
    with served(feed) as url:
        page.goto(url)
        rows = page.locator("#checks tbody tr.check")
        expect(rows.locator("td").nth(0)).to_have_text("error-rate")
        error_rate = page.locator('tr.check[data-stage="prod"][data-check="error-rate"]')
        expect(error_rate).to_have_attribute("data-outcome", "failed")
        expect(error_rate.locator("td")).to_have_text(
            [
                "error-rate",
                "main-1",
                "failed with 0.07 at 2026-01-01 00:05 UTC",
                "passes when result < 0.01, fails when result > 0.05",
                "failed 2 in a row (limit 1), inconclusive 0 (limit 2)",
            ]
        )
        expect(page.locator('tr.check[data-check="p99-latency"] td').nth(2)).to_have_text(
            "passed with 0.25 at 2026-01-01 00:05 UTC"
        )
        expect(page.locator('tr.check[data-check="saturation"]')).to_have_attribute("data-outcome", "none")
        expect(page.locator('tr.check[data-check="saturation"] td').nth(2)).to_have_text(
            "no result since 2026-01-01 00:00 UTC"
        )
        track = page.locator('li.stage[data-stage="prod"] div.track[data-track="controlPlane"]')
        expect(track.locator(".badge")).to_have_text("PAUSED")
        expect(track.locator("dd").last).to_have_text("paused (CHECK_FAILED), running 10m")
