"""Stage gates drawn over a generated scenario (SPEC section 11, CHK): approval gates with approve
commands arriving at random times (early, late, twice, for the wrong gate or a stage without one),
metric checks with the timelines their queries return (good values, bad ones, gaps without data),
stage start windows, and disruption budgets with the inventory's `lastUpgrade`.

The draws come from a generator of their own (`gates-<seed>`), so the rest of a seed's scenario is
what it was before gates were drawn: a seed found without gates keeps its fleet and script. About
two seeds in five draw no gate at all, so the behaviour without gates stays covered as much.
"""

from __future__ import annotations

import copy
import datetime as dt
import random
from typing import Any

Doc = dict[str, Any]
Rng = random.Random

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)  # the scenario's start: the generator sets none
HOUR = 3600
DAY = 86400
PATCH_INTERVALS = ("1h", "12h", "24h", "2d")
MINOR_INTERVALS = ("1d", "3d", "7d", "30d")
START_WINDOW_RULES = ("FREQ=DAILY", "FREQ=WEEKLY;BYDAY=TU", "FREQ=WEEKLY;BYDAY=MO,TH", "FREQ=HOURLY;INTERVAL=6")
QUERIES = ("error_ratio", "p99_latency_seconds", "sum(up)")
CONDITIONS = ("result < 0.01", "result <= 0.05 && result >= 0", "(result < 1 || result > 5) && result != 3")
GOOD_VALUES = (0.0, 0.002, 0.009)
BAD_VALUES = (0.02, 0.3, 0.7, 3, 6)
# when an approve arrives: at once (often before the gate is reached), while the first stages run,
# a day or more in, or near the end
APPROVE_AT = (0, 60, 600, 1800, HOUR, 2 * HOUR, 6 * HOUR, DAY, 2 * DAY, 4 * DAY)


def draw_gates(seed: int, *, sequence: Doc, clusters: list[Doc], events: list[Doc], until: int) -> list[Doc]:
    """Add gates to the first `sequence` and its later versions in `events`, `lastUpgrade` to the
    fleet and the inventory changes, and approve commands (`at` in seconds) to `events`; return the
    simulation's `metrics` for the checks' queries."""
    rng = random.Random(f"gates-{seed}")
    if rng.random() < 0.4:
        return []
    gates = {s["name"]: _stage_gates(rng) for s in sequence["stages"]}
    budget = _interval(rng) if rng.random() < 0.35 else None
    _apply(sequence, gates, budget)
    for entry in events:
        changed = entry.get("sequence")
        if changed is not None:  # mostly the same gates; now and then others, or none (SEQ-7)
            same = rng.random() < 0.8
            _apply(changed, gates if same else {s["name"]: _stage_gates(rng) for s in changed["stages"]}, budget)
    if budget is not None or any("minUpgradeInterval" in g for g in gates.values()):
        for spec in clusters:
            if rng.random() < 0.6:
                spec["lastUpgrade"] = _last_upgrade(rng, at=0)
        for entry in events:
            upsert = entry.get("inventory", {}).get("upsert")
            if upsert is not None and rng.random() < 0.4:
                upsert["lastUpgrade"] = _last_upgrade(rng, at=entry["at"])
    events += _approvals(rng, gates, until=until)
    queries = sorted({c["query"] for g in gates.values() for c in g.get("checks", [])})
    return [span for query in queries for span in _timeline(rng, query, until=until)]


def _stage_gates(rng: Rng) -> Doc:
    out: Doc = {}
    if rng.random() < 0.3:
        before = rng.random() < 0.6
        out["approval"] = {"before": before, "after": not before or rng.random() < 0.4}
    if rng.random() < 0.2:
        out["startWindow"] = {
            "start": f"2025-12-{rng.randint(1, 31):02d}T{rng.randint(0, 23):02d}:00:00Z",
            "duration": f"{rng.choice((1, 4, 8))}h",
            "recurrence": rng.choice(START_WINDOW_RULES),
        }
    if rng.random() < 0.25:
        out["minUpgradeInterval"] = _interval(rng)
    if rng.random() < 0.2:
        out["checks"] = [_check(rng, f"check-{i}") for i in range(rng.randint(1, 2))]
    return out


def _check(rng: Rng, name: str) -> Doc:
    out: Doc = {
        "name": name,
        "query": rng.choice(QUERIES),
        "successCondition": rng.choice(CONDITIONS),
        "interval": rng.choice(("5m", "10m", "1h")),
        "phases": rng.choice((["progress"], ["soak"], ["progress", "soak"])),
    }
    if rng.random() < 0.3:
        out["failureCondition"] = "result > 0.5"
    if rng.random() < 0.6:
        out["failureLimit"] = rng.randint(0, 3)
    if rng.random() < 0.6:
        out["inconclusiveLimit"] = rng.randint(0, 3)
    return out


def _timeline(rng: Rng, query: str, *, until: int) -> list[Doc]:
    """What `query` returns over the scenario: spans of one value each, mostly good, now and then a
    bad value or a gap without data (inconclusive)."""
    spans = []
    at = 0
    while at < until:
        length = rng.choice((10 * 60, HOUR, 6 * HOUR, DAY, 3 * DAY))
        if rng.random() >= 0.1:  # else a gap: no data
            value = rng.choice(GOOD_VALUES) if rng.random() < 0.75 else rng.choice(BAD_VALUES)
            spans.append({"query": query, "from": _span_time(at), "until": _span_time(at + length), "value": value})
        at += length
    return spans


def _span_time(seconds: int) -> str:
    return f"{seconds}s"


def _interval(rng: Rng) -> Doc:
    out: Doc = {}
    if rng.random() < 0.8:
        out["patch"] = rng.choice(PATCH_INTERVALS)
    if rng.random() < 0.8:
        out["minor"] = rng.choice(MINOR_INTERVALS)
    return out


def _apply(sequence: Doc, gates: dict[str, Doc], budget: Doc | None) -> None:
    for stage in sequence["stages"]:
        stage.update(copy.deepcopy(gates.get(stage["name"], {})))
    if budget is not None:
        sequence["minUpgradeInterval"] = dict(budget)


def _last_upgrade(rng: Rng, *, at: int) -> Doc:
    """Each track's last upgrade some time before `at` (seconds from the start), now and then a
    little after it (an inventory clock ahead of ours)."""
    out: Doc = {}
    for track in ("controlPlane", "nodes"):
        if rng.random() < 0.7:
            ago = rng.choice((-HOUR, 0, 30 * 60, 6 * HOUR, DAY, 3 * DAY, 20 * DAY, 40 * DAY))
            out[track] = _time(at - ago - rng.randint(0, HOUR))
    return out


def _time(offset: int) -> str:
    return (START + dt.timedelta(seconds=offset)).isoformat().replace("+00:00", "Z")


def _approvals(rng: Rng, gates: dict[str, Doc], *, until: int) -> list[Doc]:
    """Approve commands for the stages with gates, and a few wrong ones: early, late, twice, for a
    gate the stage does not have, for a stage without gates."""
    out: list[Doc] = []
    names = sorted(gates)
    for name in names:
        approval = gates[name].get("approval")
        if approval is None:
            continue
        for position in ("before", "after"):
            if not approval[position] or rng.random() < 0.15:
                continue  # a gate left waiting: the stage holds its version for good
            if rng.random() < 0.5:  # a pipeline asking again and again: refused until the gate waits
                out += _patient(rng, name, position, until=until)
                continue
            for _ in range(rng.choice((1, 1, 2, 3))):  # twice or three times: ALREADY_APPROVED
                out.append(_approve(rng, name, position, until=until))
        if rng.random() < 0.2:  # the gate the stage does not have, or have yet
            out.append(_approve(rng, name, rng.choice(("before", "after")), until=until))
    if names and rng.random() < 0.2:
        out.append(_approve(rng, rng.choice(names), rng.choice(("before", "after")), until=until))
    return out


def _patient(rng: Rng, stage: str, gate: str, *, until: int) -> list[Doc]:
    """Approvals every few hours from a random moment on, at most eight: early ones are refused (no
    approval in advance), one opens the gate once it waits, the later ones are ALREADY_APPROVED."""
    every = rng.choice((HOUR, 6 * HOUR, DAY))
    first = rng.choice(APPROVE_AT)
    times = range(first, until - HOUR, every)
    return [{"at": at, "command": {"approve": {"stage": stage, "gate": gate, "by": "pipeline"}}} for at in times[:8]]


def _approve(rng: Rng, stage: str, gate: str, *, until: int) -> Doc:
    at = min(rng.choice(APPROVE_AT) + rng.randint(0, 600), until - HOUR)
    spec: Doc = {"stage": stage, "gate": gate}
    if rng.random() < 0.7:
        spec["by"] = rng.choice(("alice", "pipeline", "ticket-4711"))
    return {"at": at, "command": {"approve": spec}}
