"""The planner's web dashboard on the real broker, in a real browser (STAT-2, STAT-5).

The services run as processes (planner with its dashboard on a free localhost port, two executors
of which two dev clusters' upgrades fail, health reporter and monitor). The page is opened before
the release exists; the release published afterwards reaches it through the live updates alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from e2e_system import (
    Pace,
    apply_fleet,
    publish_release,
    staged_cluster_names,
    staged_fleet,
    start_system,
    wait_for_fleet,
)
from playwright.sync_api import Page, expect
from service_processes import ServiceProcesses

from rollout_devenv._proc import free_port

pytestmark = [pytest.mark.integration]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
STAGES = ("dev", "prod")
PER_STAGE = 10
FAILING = ("dev-03", "dev-07")
PACE = Pace(time_scale=3600.0, upgrade_s=0.5, max_concurrent=5, ready_after_s=0.3)
WAIT_MS = 90_000


def _run_aside(work: Coroutine[Any, Any, None]) -> None:
    """Run a coroutine on a thread of its own: Playwright's sync API holds this thread's event loop."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, work).result()


def scenario_document() -> dict[str, Any]:
    return staged_fleet(
        name="dashboard",
        sequence_name="dashboard-e2e",
        stages=STAGES,
        per_stage=PER_STAGE,
        version=OLD,
        soak="2h",
        max_new=5,
    )


def test_planner_dashboard_follows_a_release_on_the_real_broker(
    page: Page,
    services: ServiceProcesses,
    tmp_path: Path,
    prefix: str,
    kafka_bootstrap: str,
    redis_url: str,
    screenshots: Path,
) -> None:
    names = staged_cluster_names(STAGES, PER_STAGE)
    apply_fleet(
        scenario_document(), tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    port, probes = free_port(), free_port()
    start_system(
        services,
        prefix=prefix,
        clusters=names,
        pace=PACE,
        planner_env={"ROLLOUT_HTTP_PORT": str(probes), "ROLLOUT_DASHBOARD_PORT": str(port)},
        executor_env={"ROLLOUT_SIMULATED__FAILING_CLUSTERS": f'["{FAILING[0]}", "{FAILING[1]}"]'},
    )
    _run_aside(wait_for_fleet(redis_url, prefix, services, clusters=len(names)))

    page.goto(f"http://127.0.0.1:{port}/")
    # the dashboard has an address of its own: the probe port (every interface) does not serve it
    assert page.request.get(f"http://127.0.0.1:{probes}/healthz").status == 200
    assert page.request.get(f"http://127.0.0.1:{probes}/api/status").status == 404
    expect(page.locator("li.stage h3")).to_have_text(list(STAGES), timeout=WAIT_MS)
    expect(page.locator(".rollouts")).to_contain_text("No rollout yet")
    page.evaluate("window.loadedOnce = 'yes'")

    _run_aside(publish_release(kafka_bootstrap, prefix, event_id="rel-dashboard", targets={"1.30": NEW}))
    dev_cp = page.locator('li.stage[data-stage="dev"] div.track[data-track="controlPlane"]')
    expect(dev_cp.locator(".badge")).to_have_text("IN_PROGRESS", timeout=WAIT_MS)
    expect(page.locator(".rollouts")).to_contain_text("RUNNING")

    # the two failed upgrades keep dev from soaking until SOAK-4; the wait says so, with its numbers
    wait = page.locator('tr.wait[data-rule="SOAK-2"][data-where="dev/controlPlane"]')
    expect(wait).to_contain_text(
        "2 cluster(s) still to upgrade cannot start now (failed, deprecated API, or waiting for a window or "
        "their control plane); the stage soaks anyway at",
        timeout=WAIT_MS,
    )
    expect(wait).to_contain_text("remaining 2, forcedSoakAt ")
    expect(dev_cp.locator(".counts")).to_contain_text("FAILED 2")
    expect(dev_cp.locator(".counts")).to_contain_text("COMPLETE 8")

    count = page.locator("#cluster-count")
    expect(count).to_have_text("1-2 of 2 matching (2 need attention)", timeout=WAIT_MS)
    expect(page.locator("#cluster-rows th")).to_have_text(list(FAILING))
    page.fill('input[name="name"]', "07")
    expect(count).to_have_text("1-1 of 1 matching (2 need attention)")
    expect(page.locator("#cluster-rows th")).to_have_text(["dev-07"])
    expect(page.locator("#cluster-rows td").nth(0)).to_have_text("FAILED")
    page.screenshot(path=str(screenshots / "services-dev-held-by-failures.png"), full_page=True)
    assert page.evaluate("window.loadedOnce") == "yes"
    assert not services.exited(), services.log_tail("planner")
