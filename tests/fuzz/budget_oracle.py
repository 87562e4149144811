"""CHK-4 on a report: no upgrade starts sooner after the track's last upgrade than its budget allows.

The shared checker knows nothing of the CHK rules, so the oracle checks this one itself. It judges
what it can know for sure from the scenario and the report alone: batches before any `sequence`
event (so the first definition is in force), of clusters whose inventory record has not changed
yet (so their `lastUpgrade` and versions are the start's). A track's last upgrade is the later of
the inventory's `lastUpgrade` and the upgrades the report shows succeeding; the new upgrade is
`minor` when its version's minor differs from what the track runs then.
"""

from __future__ import annotations

from typing import Any

from rollout_common.gates import UpgradeKind
from rollout_common.version import Version, parse_version
from rollout_common.window import to_epoch
from rollout_planner.simulation.scenario import Scenario

_TRACKS = ("controlPlane", "nodes")


def budget_problems(scenario: Scenario, report: dict[str, Any]) -> list[str]:
    origin = to_epoch(scenario.start)
    changed_at = _first_change(scenario)
    sequence = scenario.sequence
    stages = {s.name: s for s in sequence.stages}
    clusters = {c.name: c for c in scenario.fleet()}
    problems = []
    for batch in report["batches"]:
        t = batch["t"]
        if t >= changed_at.get("", float("inf")):
            break
        interval = stages[batch["stage"]].upgrade_interval(sequence.min_upgrade_interval)
        if interval is None:
            continue
        for name in batch["clusters"]:
            spec = clusters.get(name)
            if spec is None or t >= changed_at.get(name, float("inf")):
                continue
            track = _TRACKS.index(batch["track"])
            known = spec.last_upgrade.epochs()[track] if spec.last_upgrade is not None else None
            last, current = _history(report, name, batch["track"], before=t, origin=origin, start=known)
            current = current or _version(spec, track)
            if last is None:
                continue
            minor = parse_version(batch["version"]).minor != current.minor
            seconds = interval.seconds(UpgradeKind.MINOR if minor else UpgradeKind.PATCH)
            if seconds > 0 and origin + t < last + seconds:  # 0s: no minimum, whatever the clocks say
                problems.append(
                    f"budget: CHK-4: {name}/{batch['track']} started at t={t} toward {batch['version']}, "
                    f"{origin + t - last:.0f} s after its last upgrade; the {'minor' if minor else 'patch'} "
                    f"interval is {seconds:.0f} s"
                )
    return problems


def _first_change(scenario: Scenario) -> dict[str, float]:
    """When the definition first changes (key ""), and when each cluster's inventory record first does."""
    out: dict[str, float] = {}
    for event in scenario.events:
        if event.sequence is not None:
            out.setdefault("", event.at)
        if event.inventory is not None:
            name = event.inventory.upsert.name if event.inventory.upsert is not None else event.inventory.remove
            if name is not None:
                out.setdefault(name, event.at)
    return out


def _version(spec: Any, track: int) -> Version:
    return spec.control_plane if track == 0 else spec.nodes


def _history(
    report: dict[str, Any], name: str, track: str, *, before: float, origin: float, start: float | None
) -> tuple[float | None, Version | None]:
    """The track's last upgrade (epoch) at `before`, from `start` (the inventory's) and the upgrades
    the report shows succeeding, and the version the last of those went to (None: none did)."""
    last, current = start, None
    for event in report["clusterEvents"]:
        ours = event["cluster"] == name and event["track"] == track and event["event"] == "succeeded"
        if ours and event["t"] <= before:
            current = parse_version(event["version"])
            finished = origin + event["t"]
            last = finished if last is None else max(last, finished)
    return last, current
