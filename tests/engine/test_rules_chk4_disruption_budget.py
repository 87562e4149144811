"""CHK-4 disruption budgets: a minimum time between two upgrades of the same cluster and track.

`minUpgradeInterval: {patch, minor}` on the sequence or a stage (the stage's fields win); an upgrade
is `minor` when it changes the minor version. A cluster upgraded too recently takes no batch slot
(as WIN-3), waits PAUSED with type DISRUPTION_BUDGET until its budget ends, and is not done for
GATE-2 until the forced soak (SOAK-4). Its last upgrade is the later of the inventory's
`lastUpgrade` and the upgrades this system performed.
"""

from __future__ import annotations

from typing import Any

from enginekit import CP, DAY, HOUR, MIN, NODES, T0, V30, V31, Driver, advances, cluster, stage, transitions
from rich.text import Text

from rollout_cli.dashboard import attention_text
from rollout_common.commands import WaitChanged
from rollout_common.sequence import Sequence
from rollout_common.window import from_epoch
from rollout_planner.engine.model import CP as CP_INDEX
from rollout_planner.engine.snapshot import dump, load
from rollout_planner.engine.views import stage_view, track_status
from rollout_planner.service.status_document import attention

GKE = {"patch": "24h", "minor": "30d"}  # GKE's default disruption budget
V31_OLD = "1.31.10-gke.100"
V31_NEW = "1.31.14-gke.200"


def _at(offset: float) -> str:
    return from_epoch(T0 + offset).isoformat().replace("+00:00", "Z")


def _driver(*stages: dict[str, Any], clusters: list[Any], budget: dict[str, str] | None = GKE) -> Driver:
    raw: dict[str, Any] = {"name": "main", "channel": "regular", "stages": list(stages)}
    if budget is not None:
        raw["minUpgradeInterval"] = budget
    return Driver(Sequence.model_validate(raw), clusters)


def _status(d: Driver, name: str, track: int = CP_INDEX) -> tuple[str, str | None]:
    status, reason = track_status(d.state, d.state.clusters[name], track)
    return status.value, reason


def _budget_waits(d: Driver, stage_name: str) -> list[dict[str, Any]]:
    view = stage_view(d.state, d.state.stage_by_name[stage_name])
    return [w for w in view["tracks"]["controlPlane"]["waits"] if w["rule"] == "CHK-4"]


def test_chk_4_a_patch_upgrade_waits_24h_from_the_inventorys_last_upgrade() -> None:
    d = _driver(
        stage("prod", soak="1h"),
        clusters=[
            cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-12 * HOUR)}),
            cluster("prod-2", V31_OLD),
        ],
    )
    out = d.release({"1.31": V31})
    assert advances(out, CP) == [("prod", "controlPlane", V31, ["prod-2"])]
    assert _status(d, "prod-1") == ("PAUSED", "DISRUPTION_BUDGET")
    changed = [c for c in out if isinstance(c, WaitChanged) and c.track is CP]
    assert [(w.rule, w.until, w.clusters) for w in changed[-1].waits] == [("CHK-4", T0 + 12 * HOUR, ("prod-1",))]
    assert changed[-1].waits[0].message == (
        "1 cluster(s) were upgraded on this track too recently (prod-1); the first disruption budget ends "
        "at 2026-01-01T12:00:00+00:00 (CHK-4)"
    )
    assert d.wake(at=12 * HOUR - 1) == []
    out = d.wake(at=12 * HOUR)
    assert advances(out, CP) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_4_a_minor_upgrade_waits_30d_and_the_budget_names_until_when() -> None:
    d = _driver(
        stage("prod", soak="1h"),
        clusters=[cluster("prod-1", V30, lastUpgrade={"controlPlane": _at(-4 * DAY)})],
    )
    out = d.release({"1.30": V31})
    assert advances(out) == []
    assert transitions(out) == [("prod", "controlPlane", "IN_PROGRESS", V31), ("prod", "nodes", "IN_PROGRESS", V31)]
    waits = _budget_waits(d, "prod")
    assert [(w["until"], w["clusters"], w["numbers"]["waiting"]) for w in waits] == [(T0 + 26 * DAY, ["prod-1"], 1)]
    assert advances(d.wake(at=26 * DAY - MIN)) == []
    assert _status(d, "prod-1") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=26 * DAY)) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_4_a_stages_interval_wins_over_the_sequences_field_by_field() -> None:
    """The stage sets patch 1h only: its patch upgrades wait 1h, its minor ones the sequence's 30d."""
    d = _driver(
        stage("prod", soak="1h", minUpgradeInterval={"patch": "1h"}),
        clusters=[
            cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-30 * MIN)}),
            cluster("prod-2", V30, lastUpgrade={"controlPlane": _at(-4 * DAY)}),
        ],
    )
    assert advances(d.release({"1.30": V31, "1.31": V31})) == []
    assert advances(d.wake(at=30 * MIN)) == [("prod", "controlPlane", V31, ["prod-1"])]
    assert _status(d, "prod-2") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=26 * DAY), CP) == [("prod", "controlPlane", V31, ["prod-2"])]


def test_chk_4_an_upgrade_this_system_did_is_the_last_upgrade_unless_the_inventory_knows_a_later_one() -> None:
    d = _driver(
        stage("prod", soak="0d"),
        clusters=[cluster("prod-1", V31_OLD), cluster("prod-2", V31_OLD), cluster("prod-3", V31_OLD)],
    )
    d.release({"1.31": V31})
    d.finish(["prod-1", "prod-2", "prod-3"], CP, at=10 * MIN, ready=True)
    d.finish(["prod-1", "prod-2", "prod-3"], NODES, at=40 * MIN, ready=True)
    # prod-2 was upgraded again outside this system at 2h; prod-3's record carries an older time
    d.upsert(cluster("prod-2", V31, lastUpgrade={"controlPlane": _at(2 * HOUR)}), at=3 * HOUR)
    d.upsert(cluster("prod-3", V31, lastUpgrade={"controlPlane": _at(-10 * DAY)}), at=3 * HOUR)
    out = d.release({"1.31": V31_NEW}, at=4 * HOUR, event_id="rel-2")
    assert advances(out) == []
    assert advances(d.wake(at=DAY + 10 * MIN)) == [("prod", "controlPlane", V31_NEW, ["prod-1", "prod-3"])]
    assert _status(d, "prod-2") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=DAY + 2 * HOUR)) == [("prod", "controlPlane", V31_NEW, ["prod-2"])]


def test_chk_4_a_held_cluster_is_not_done_until_the_forced_soak_and_goes_when_its_budget_ends() -> None:
    """GATE-2: it holds the track's soak; SOAK-4 soaks anyway at 30 days, and it is upgraded after."""
    d = _driver(
        stage("prod", soak="1d", minUpgradeInterval={"minor": "60d"}),
        clusters=[cluster("prod-1"), cluster("prod-2", lastUpgrade={"controlPlane": _at(-25 * DAY)})],
    )
    assert advances(d.release({"1.30": V31})) == [("prod", "controlPlane", V31, ["prod-1"])]
    d.finish(["prod-1"], CP, at=10 * MIN, ready=True)
    d.finish(["prod-1"], NODES, at=40 * MIN, ready=True)
    assert transitions(d.wake(at=30 * DAY - 1)) == []
    out = d.wake(at=30 * DAY)
    assert transitions(out) == [
        ("prod", "controlPlane", "FORCED_SOAKING", V31),
        ("prod", "nodes", "FORCED_SOAKING", V31),
    ]
    assert transitions(d.wake(at=31 * DAY)) == [
        ("prod", "controlPlane", "COMPLETE", V31),
        ("prod", "nodes", "COMPLETE", V31),
    ]
    assert _status(d, "prod-2") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=35 * DAY)) == [("prod", "controlPlane", V31, ["prod-2"])]


def test_chk_4_a_budget_and_a_closed_window_wait_for_both() -> None:
    """The budget ends at 12h, the window opens daily at 20:00: it starts at 20h, PAUSED with the
    budget's type until 12h and the window's after."""
    window = {"start": "2026-01-01T20:00:00Z", "duration": "2h", "recurrence": "FREQ=DAILY"}
    d = _driver(
        stage("prod", soak="1h"),
        clusters=[cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-12 * HOUR)}, maintenanceWindow=window)],
    )
    assert advances(d.release({"1.31": V31})) == []
    assert _status(d, "prod-1") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=12 * HOUR)) == []
    assert _status(d, "prod-1") == ("PAUSED", "MAINTENANCE_POLICY")
    assert advances(d.wake(at=20 * HOUR)) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_4_a_restored_planner_keeps_the_upgrades_it_did_and_the_wait() -> None:
    """BUS-6: the last upgrades this system performed are in the snapshot."""
    d = _driver(stage("prod", soak="0d"), clusters=[cluster("prod-1", V31_OLD)])
    d.release({"1.31": V31})
    d.finish(["prod-1"], CP, at=10 * MIN, ready=True)
    d.finish(["prod-1"], NODES, at=40 * MIN, ready=True)
    d.release({"1.31": V31_NEW}, at=HOUR, event_id="rel-2")
    d.state = load(dump(d.state))
    assert d.state.clusters["prod-1"].upgraded_at == (T0 + 10 * MIN, T0 + 40 * MIN)
    assert _status(d, "prod-1") == ("PAUSED", "DISRUPTION_BUDGET")
    assert advances(d.wake(at=DAY + 10 * MIN)) == [("prod", "controlPlane", V31_NEW, ["prod-1"])]


def test_chk_4_without_min_upgrade_interval_a_recent_last_upgrade_changes_nothing() -> None:
    d = _driver(
        stage("prod", soak="1h"),
        clusters=[cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-MIN)})],
        budget=None,
    )
    assert advances(d.release({"1.31": V31})) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_4_a_zero_interval_is_no_minimum() -> None:
    d = _driver(
        stage("prod", soak="1h", minUpgradeInterval={"patch": "0s"}),
        clusters=[cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-MIN)})],
    )
    assert advances(d.release({"1.31": V31})) == [("prod", "controlPlane", V31, ["prod-1"])]


def test_chk_4_stat_5_attention_lists_budget_held_clusters_apart_from_closed_windows() -> None:
    """`rollout status` names the clusters a budget holds and until when, apart from those waiting
    for a maintenance window (MAINTENANCE_POLICY), so the screen says which of the two holds them."""
    window = {"start": "2026-01-01T20:00:00Z", "duration": "2h", "recurrence": "FREQ=DAILY"}
    d = _driver(
        stage("prod", soak="1h"),
        clusters=[
            cluster("prod-1", V31_OLD, lastUpgrade={"controlPlane": _at(-12 * HOUR)}),
            cluster("prod-2", V31_OLD, maintenanceWindow=window),
        ],
    )
    d.release({"1.31": V31})
    block = attention(d.state)
    assert block["pausedBudget"] == [{"cluster": "prod-1", "track": "controlPlane", "until": T0 + 12 * HOUR}]
    assert block["pausedBudgetTotal"] == 1
    assert block["pausedWindow"] == [{"cluster": "prod-2", "track": "controlPlane", "until": T0 + 20 * HOUR}]
    text = attention_text({"attention": block}, clock=T0)
    assert isinstance(text, Text)
    assert "PAUSED DISRUPTION_BUDGET 1 cluster track(s): prod-1; the first budget ends" in text.plain
