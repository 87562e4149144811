"""How the status document is put into words, shared by `rollout status` and the web dashboard.

Plain strings only (no terminal styling, no HTML), so a wait reads the same wherever it is shown.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from rollout_common.duration import format_duration
from rollout_common.status import NotReadyType

Doc = Mapping[str, Any]

TRACK_NAMES = ("controlPlane", "nodes")
# STAT-1 statuses in the order a person scans them: finished first, then moving, then stuck.
STATUS_ORDER = (
    "COMPLETE",
    "SKIPPED_NEWER",
    "IN_PROGRESS",
    "NOT_READY",
    "OUT_OF_SYNC",
    "PENDING",
    "PAUSED",
    "FAILED",
    "INELIGIBLE",
)
MAX_UPGRADE_SECONDS = 30 * 86400  # SOAK-4: a track force-soaks this long after it started
NAMES_SHOWN = 6


def clock_text(epoch: float, *, origin: float | None = None) -> str:
    """`2026-01-05 09:10 UTC` and, when the run's start is known, `(T+1h10m)`."""
    moment = dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if origin is None:
        return moment
    return f"{moment} (T+{format_duration(max(0.0, epoch - origin))})"


def ordered_statuses(counts: Mapping[str, int]) -> list[str]:
    known = [s for s in STATUS_ORDER if counts.get(s)]
    return known + sorted(s for s in counts if s not in STATUS_ORDER and counts[s])


def timing_text(track: Mapping[str, Any], clock: float) -> str:
    """What a person asks next about a track: when does the soak end, how long has it been running."""
    state = track["state"]
    if state in ("SOAKING", "FORCED_SOAKING") and track.get("soakEnd") is not None:
        return f"soak ends in {format_duration(max(0.0, track['soakEnd'] - clock))}"
    if state in ("IN_PROGRESS", "PAUSED") and track.get("startedAt") is not None:
        running = f"running {format_duration(max(0.0, clock - track['startedAt']))}"
        # why it halted (an operator, the failure budget, a check) is the first thing asked of a pause
        halted = f"paused ({track['reason']}), " if state == "PAUSED" and track.get("reason") else ""
        return halted + running
    if state == "COMPLETE" and track.get("qualified"):
        return "qualified downstream"  # the version column shows which version
    if state == "STUCK":
        return str(track.get("reason") or "")
    return ""


def partition_counts(partition: Mapping[str, Any]) -> tuple[int, int, int]:
    """(done, not ready, waiting) for one track of one partition (STAT-3 numbers).

    `unavailable` is per cluster (either track), `notDone` per track; an unavailable cluster is never
    done, so the not-ready share is capped by notDone and the rest of notDone is still waiting.
    """
    size, not_done = partition["clusters"], partition["notDone"]
    not_ready = min(partition["unavailable"], not_done)
    return size - not_done, not_ready, not_done - not_ready


def names_text(names: Sequence[str], *, shown: int = NAMES_SHOWN, total: int | None = None) -> str:
    """The first names, and how many more there are (`total` when the list itself was capped)."""
    total = max(len(names), total or 0)
    extra = f" +{total - min(shown, len(names))} more" if total > shown else ""
    return ", ".join(names[:shown]) + extra


def wait_lines(doc: Doc) -> list[tuple[str, Mapping[str, Any]]]:
    """Every current wait as (stage/track, wait), in stage order (STAT-5)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for stage in doc["stages"]:
        for name in TRACK_NAMES:
            track = stage["tracks"][name]
            waits = list(track["waits"]) or _failure_hold(track) or _halt_hold(stage, track)
            out += [(f"{stage['name']}/{name}", wait) for wait in waits]
    return out


_HALTS = ("CHECK_FAILED", "CHECK_INCONCLUSIVE")


def _halt_hold(stage: Mapping[str, Any], track: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A track a metric check halted waits for a resume, not for a batch slot: the engine records no
    batch wait for it, yet "why is this stage not moving?" has this answer (CHK-2, STAT-5)."""
    reason = track.get("reason")
    if track["state"] != "PAUSED" or reason not in _HALTS:
        return []
    outcome = "failed" if reason == "CHECK_FAILED" else "inconclusive"
    checks = [
        f"{c['check']} {outcome} with {c.get('value')}, passes when {c.get('successCondition')}"
        for c in stage.get("checks", ())
        if c.get("rollout") == track.get("rollout") and c.get("outcome") == outcome
    ]
    named = "; ".join(checks) or "a metric check"
    return [
        {
            "rule": "CHK-2",
            "clusters": (),
            "message": f"halted ({reason}): {named}; running upgrades finish, nothing more is handed out or "
            "qualified until the rollout is resumed (OPS-1)",
        }
    ]


def _failure_hold(track: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A running track with no gate closed but failed clusters is held by them until SOAK-4.

    The engine records no wait for this (its waits are about handing out batches), yet it is the
    answer to "why is this stage not soaking?", so the view says it.
    """
    failed = track["counts"].get("FAILED", 0)
    if track["state"] != "IN_PROGRESS" or not failed or track.get("startedAt") is None:
        return []
    forced_at = clock_text(track["startedAt"] + MAX_UPGRADE_SECONDS)
    return [
        {
            "rule": "FAILED",
            "clusters": (),
            "message": f"{failed} failed upgrade(s) keep the track from finishing; it soaks anyway at "
            f"{forced_at}, 30 days after it started (SOAK-4)",
        }
    ]


def named_total(wait: Mapping[str, Any]) -> int | None:
    """How many clusters a wait is about, when its list of names is capped (GATE-1, WIN)."""
    numbers = wait.get("numbers") or {}
    total = numbers.get("unavailable") if wait["rule"] == "GATE-1" else numbers.get("waiting")
    return total if isinstance(total, int) else None


def gate_rows(doc: Doc) -> list[tuple[str, Mapping[str, Any]]]:
    """Every approval gate a rollout reached, as (stage, gate), in stage order (CHK-1, STAT-5)."""
    return [(str(stage["name"]), gate) for stage in doc["stages"] for gate in stage.get("gates") or ()]


def approval_text(gate: Mapping[str, Any], *, clock: float) -> str:
    """`approved by alice at 2026-01-07 00:00 UTC: CAB-42`, or how long the gate has waited."""
    approved_at = gate.get("approvedAt")
    if approved_at is None:
        return f"not approved yet, waiting {format_duration(max(0.0, clock - float(gate['waitingSince'])))}"
    by = gate.get("approvedBy") or "an unnamed approver"
    said = f": {gate['comment']}" if gate.get("comment") else ""
    return f"approved by {by} at {clock_text(float(approved_at))}{said}"


def check_rows(doc: Doc) -> list[tuple[str, Mapping[str, Any]]]:
    """Every metric check some rollout evaluated at a stage, as (stage, check), in stage order (CHK-2)."""
    return [(str(stage["name"]), check) for stage in doc["stages"] for check in stage.get("checks") or ()]


def check_result_text(check: Mapping[str, Any]) -> str:
    """`failed with 0.07 at 2026-01-05 00:20 UTC`: the latest result against which the condition is judged."""
    observed = check.get("observedAt")
    if check.get("outcome") is None or observed is None:
        since = check.get("since")
        return "no result yet" if since is None else f"no result since {clock_text(float(since))}"
    value = check.get("value")
    shown = "no value" if value is None else f"{float(value):g}"
    return f"{check['outcome']} with {shown} at {clock_text(float(observed))}"


def check_condition_text(check: Mapping[str, Any]) -> str:
    """`passes when result < 0.01, fails when result > 0.05`."""
    text = f"passes when {check['successCondition']}"
    if check.get("failureCondition"):
        text += f", fails when {check['failureCondition']}"
    return text


def check_counts_text(check: Mapping[str, Any]) -> str:
    """How close the check is to halting the stage: results in a row against their limits."""
    return (
        f"failed {check.get('failedInARow', 0)} in a row (limit {check.get('failureLimit', 0)}), "
        f"inconclusive {check.get('inconclusiveInARow', 0)} (limit {check.get('inconclusiveLimit', 0)})"
    )


def until_text(epoch: float, *, clock: float | None) -> str:
    """`2026-01-05 09:10 UTC (in 1h10m)`; the countdown only when the current clock is known."""
    moment = clock_text(epoch)
    if clock is None:
        return moment
    return f"{moment} (in {format_duration(max(0.0, epoch - clock))})"


def version_mismatch_reason(*, expected: str, reported: str) -> str:
    """The status reason of a cluster track whose upgrade succeeded but which reports another version."""
    return f"{NotReadyType.VERSION_MISMATCH.value}: upgraded to {expected} but reports {reported}"


def version_mismatch_text(cluster: str, track: str, *, expected: str, reported: str) -> str:
    """The same, for the progress stream and `rollout status`: which cluster, which track, what now."""
    return (
        f"cluster {cluster} {track}: {version_mismatch_reason(expected=expected, reported=reported)}; "
        f"not counted done until it reports {expected}"
    )
