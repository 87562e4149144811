"""Every value on the page is text: a cluster named `<script>alert(1)</script>` is shown, never run.

Cluster names are DNS-like in the fleet, but executor errors, labels and wait messages carry any
text; the page is fed a snapshot with markup in every place a value is shown.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect
from served import served

from rollout_adapters.web_dashboard import ClusterRow, Feed

EVIL = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'


def _track(state: str, *, waits: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "state": state,
        "rollout": "r1",
        "reason": None,
        "version": IMG,
        "soakEnd": None,
        "startedAt": 1767600000.0,
        "finishedAt": None,
        "counts": {"FAILED": 1, EVIL: 2},
        "qualified": [],
        "partitions": [
            {"name": EVIL, "clusters": 3, "maxUnavailable": 1, "unavailable": 1, "notDone": 1, "ready": False}
        ],
        "waits": waits,
    }


def _doc() -> dict[str, Any]:
    wait = {"rule": "GATE-1", "message": f"waiting for {EVIL}", "clusters": [EVIL], "numbers": {"x": IMG}}
    return {
        "sequence": EVIL,
        "channel": IMG,
        "now": 1767603600.0,
        "batch": 3,
        "clusters": 3,
        "stages": [
            {
                "name": EVIL,
                "clusters": 3,
                "tracks": {"controlPlane": _track("IN_PROGRESS", waits=[wait]), "nodes": _track(EVIL, waits=[])},
                # CHK-2: a check's name and conditions are the sequence author's words
                "checks": [
                    {
                        "rollout": EVIL,
                        "check": IMG,
                        "outcome": EVIL,
                        "value": 0.5,
                        "observedAt": 1767600000.0,
                        "successCondition": EVIL,
                        "failureCondition": IMG,
                        "failedInARow": 1,
                        "failureLimit": 0,
                        "inconclusiveInARow": 0,
                        "inconclusiveLimit": 2,
                    }
                ],
                # CHK-1: who approved and why are any client's words
                "gates": [
                    {
                        "rollout": EVIL,
                        "gate": IMG,
                        "waitingSince": 1767600000.0,
                        "approvedAt": 1767603000.0,
                        "approvedBy": IMG,
                        "comment": EVIL,
                    }
                ],
            }
        ],
        "rollouts": [
            {
                "id": EVIL,
                "state": "RUNNING",
                "reason": IMG,
                "createdAt": 1767600000.0,
                "versions": [EVIL],
                "stages": [{"stage": EVIL, "track": "controlPlane", "state": EVIL, "startedAt": 1767600000.0}],
            }
        ],
        "nextWakeUp": {"at": 1767607200.0, "kind": "soak", "why": EVIL},
        "attention": None,
    }


def test_markup_in_every_value_is_shown_as_text(page: Page) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    feed = Feed()
    row = ClusterRow(
        name=EVIL, kind="FAILED", status="FAILED", detail=IMG, stage=EVIL, partition=EVIL, labels={EVIL: IMG}
    )
    feed.publish(_doc(), [row])
    with served(feed) as url:
        page.goto(url)
        expect(page.locator("li.stage h3")).to_have_text([EVIL])
        expect(page.locator("#clusters tbody th")).to_have_text([EVIL])
        expect(page.locator("tr.wait")).to_contain_text(f"clusters: {EVIL}")
        expect(page.locator("tr.check td")).to_have_text(
            [
                IMG,
                EVIL,
                f"{EVIL} with 0.5 at 2026-01-05 08:00 UTC",
                f"passes when {EVIL}, fails when {IMG}",
                "failed 1 in a row (limit 0), inconclusive 0 (limit 2)",
            ]
        )
        expect(page.locator("tr.gate td")).to_have_text(
            [IMG, EVIL, "2026-01-05 08:00 UTC", f"approved approved by {IMG} at 2026-01-05 08:50 UTC: {EVIL}"]
        )
        # the live path: a new snapshot swaps the sections in; the filter path: rows built by the script
        feed.publish(_doc(), [row])
        expect(page.locator("#live-state")).to_have_text("live: batch 3", timeout=10_000)
        page.fill('input[name="name"]', "script")
        expect(page.locator("#cluster-count")).to_have_text("1-1 of 1 matching (1 need attention)")
        expect(page.locator("#clusters tbody td").last).to_have_text(IMG)
        expect(page.locator("li.stage h3")).to_have_text([EVIL])
        # nothing of it became an element or ran
        assert page.locator("img").count() == 0
        assert page.evaluate("document.querySelectorAll('script').length") == 1  # the page's own module
        assert dialogs == []
