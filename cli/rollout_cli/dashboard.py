"""Rich rendering of a rollout status document: stages, partitions, wait reasons, and the final summary.

The input is the planner's status document shape (SPEC STAT-2..5): `{"now": epoch seconds, "stages":
[stage_view(...), ...]}` as written by the planner service and built by `rollout demo`. Nothing here
touches the engine, so `rollout watch` / `rollout status` can draw the same views from a stored
document.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rollout_common.duration import format_duration

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
_STATE_STYLE = {
    "PENDING": "dim",
    "IN_PROGRESS": "bold cyan",
    "SOAKING": "magenta",
    "FORCED_SOAKING": "bold yellow",
    "COMPLETE": "bold green",
    "PAUSED": "yellow",
    "STUCK": "bold red",
    "CANCELLED": "red",
}
_STATUS_STYLE = {
    "COMPLETE": "green",
    "FAILED": "bold red",
    "PAUSED": "yellow",
    "IN_PROGRESS": "cyan",
    "NOT_READY": "yellow",
    "INELIGIBLE": "red",
    "SKIPPED_NEWER": "green",
}
_BAR_WIDTH = 12
MAX_UPGRADE_SECONDS = 30 * 86400  # SOAK-4: a track force-soaks this long after it started
# a live view must fit a 40-row terminal: header-rule-only tables, a few recent events
_LIVE_BOX = box.SIMPLE_HEAD
_NAMES_SHOWN = 6


@dataclass(frozen=True, slots=True)
class Attention:
    """One cluster the summary points at (a failed upgrade, an outage), with the reason in words."""

    cluster: str
    kind: str
    status: str
    reason: str


def clock_text(epoch: float, *, origin: float | None = None) -> str:
    """`2026-01-05 09:10 UTC` and, when the run's start is known, `(T+1h10m)`."""
    moment = dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if origin is None:
        return moment
    return f"{moment} (T+{format_duration(max(0.0, epoch - origin))})"


def state_text(state: str) -> Text:
    return Text(state, style=_STATE_STYLE.get(state, ""))


def counts_text(counts: Mapping[str, int]) -> Text:
    out = Text()
    for status in _ordered(counts):
        if out:
            out.append("  ")
        out.append(f"{status} {counts[status]}", style=_STATUS_STYLE.get(status, ""))
    return out


def _ordered(counts: Mapping[str, int]) -> list[str]:
    known = [s for s in STATUS_ORDER if counts.get(s)]
    return known + sorted(s for s in counts if s not in STATUS_ORDER and counts[s])


def _timing(track: Mapping[str, Any], clock: float) -> str:
    """What a person asks next about a track: when does the soak end, how long has it been running."""
    state = track["state"]
    if state in ("SOAKING", "FORCED_SOAKING") and track.get("soakEnd") is not None:
        return f"soak ends in {format_duration(max(0.0, track['soakEnd'] - clock))}"
    if state in ("IN_PROGRESS", "PAUSED") and track.get("startedAt") is not None:
        return f"running {format_duration(max(0.0, clock - track['startedAt']))}"
    if state == "COMPLETE" and track.get("qualified"):
        return "qualified downstream"  # the version column shows which version
    if state == "STUCK":
        return str(track.get("reason") or "")
    return ""


def stages_table(doc: Doc, *, clock: float) -> Table:
    table = Table(box=_LIVE_BOX, expand=True, pad_edge=False, show_edge=False)
    for column in ("stage", "track", "state", "version", "soak / timing", "clusters by status"):
        table.add_column(column, no_wrap=column != "clusters by status")
    for stage in doc["stages"]:
        for index, name in enumerate(TRACK_NAMES):
            track = stage["tracks"][name]
            table.add_row(
                Text(stage["name"], style="bold") if index == 0 else "",
                name,
                state_text(track["state"]),
                track.get("version") or "-",
                _timing(track, clock),
                counts_text(track["counts"]),
            )
    return table


def partition_bar(*, size: int, done: int, not_ready: int, width: int = _BAR_WIDTH) -> Text:
    """Done (green), upgraded-or-offline but not ready (yellow), still waiting (grey), to scale."""
    if size <= 0:
        return Text("·" * width, style="dim")
    done_w = round(width * done / size)
    not_ready_w = min(width - done_w, round(width * not_ready / size))
    bar = Text("█" * done_w, style="green")
    bar.append("█" * not_ready_w, style="yellow")
    bar.append("░" * (width - done_w - not_ready_w), style="grey50")
    return bar


def partition_counts(partition: Mapping[str, Any]) -> tuple[int, int, int]:
    """(done, not ready, waiting) for one track of one partition (STAT-3 numbers).

    `unavailable` is per cluster (either track), `notDone` per track; an unavailable cluster is never
    done, so the not-ready share is capped by notDone and the rest of notDone is still waiting.
    """
    size, not_done = partition["clusters"], partition["notDone"]
    not_ready = min(partition["unavailable"], not_done)
    return size - not_done, not_ready, not_done - not_ready


def _partition_cell(partition: Mapping[str, Any], *, reached: bool) -> Text:
    """Bar, then done/not ready/waiting (the column header says so), then GATE-2 Ready or NotReady."""
    if not reached:
        return Text("░" * _BAR_WIDTH + " version not here yet", style="dim")
    done, not_ready, waiting = partition_counts(partition)
    cell = partition_bar(size=partition["clusters"], done=done, not_ready=not_ready)
    cell.append(f" {done:>3}", style="green")
    cell.append("/")
    cell.append(f"{not_ready}", style="yellow" if not_ready else "")
    cell.append(f"/{waiting}")
    cell.append(" Ready" if partition["ready"] else " NotReady", style="green" if partition["ready"] else "bold red")
    return cell


def partitions_table(doc: Doc) -> Table:
    table = Table(
        box=_LIVE_BOX,
        expand=True,
        pad_edge=False,
        show_edge=False,
        caption_justify="left",
        caption="per track: clusters done / not ready / waiting; NotReady = more not done than maxUnavailable (GATE-2)",
    )
    table.add_column("stage", no_wrap=True)
    table.add_column("partition", no_wrap=True, min_width=9)
    table.add_column("size", justify="right", min_width=4)
    table.add_column("maxUnav", justify="right", min_width=7)
    for name in TRACK_NAMES:
        table.add_column(name, no_wrap=True)
    for stage in doc["stages"]:
        tracks = [stage["tracks"][name] for name in TRACK_NAMES]
        for index, partition in enumerate(tracks[0]["partitions"]):
            cells = [_partition_cell(t["partitions"][index], reached=t["state"] != "PENDING") for t in tracks]
            table.add_row(
                Text(stage["name"], style="bold") if index == 0 else "",
                partition["name"],
                str(partition["clusters"]),
                str(partition["maxUnavailable"]),
                *cells,
            )
    return table


def names_text(names: Sequence[str], *, shown: int = _NAMES_SHOWN) -> str:
    extra = f" +{len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + extra


def wait_lines(doc: Doc) -> list[tuple[str, Mapping[str, Any]]]:
    """Every current wait as (stage/track, wait), in stage order (STAT-5)."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for stage in doc["stages"]:
        for name in TRACK_NAMES:
            track = stage["tracks"][name]
            waits = list(track["waits"]) or _failure_hold(track)
            out += [(f"{stage['name']}/{name}", wait) for wait in waits]
    return out


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


def waits_table(doc: Doc) -> RenderableType:
    rows = wait_lines(doc)
    if not rows:
        return Text("Nothing is waiting on a gate right now.", style="dim")
    table = Table(box=_LIVE_BOX, expand=True, pad_edge=False, show_edge=False)
    table.add_column("waiting: stage/track", no_wrap=True)
    table.add_column("rule", no_wrap=True)
    table.add_column("why")
    for where, wait in rows:
        reason = Text(wait["message"])
        if wait.get("clusters"):
            reason.append(f"\n  clusters: {names_text(wait['clusters'])}", style="dim")
        table.add_row(where, Text(wait["rule"], style="yellow"), reason)
    return table


def dashboard(
    doc: Doc, *, clock: float, title: str, origin: float | None = None, recent: Iterable[str] = (), footer: str = ""
) -> RenderableType:
    """The live view: header clock, stages, partitions, waits, and the latest log lines."""
    parts: list[RenderableType] = [stages_table(doc, clock=clock), partitions_table(doc), waits_table(doc)]
    lines = list(recent)
    if lines:
        parts.append(
            Panel(
                Text("\n".join(lines), overflow="ellipsis", no_wrap=True),
                title="Latest events",
                title_align="left",
                border_style="dim",
            )
        )
    subtitle = Text(footer, style="dim") if footer else None
    return Panel(
        Group(*parts),
        title=f"[bold]{title}[/]  simulated clock {clock_text(clock, origin=origin)}",
        title_align="left",
        subtitle=subtitle,
        subtitle_align="right",
    )


def summary_table(doc: Doc) -> Table:
    table = Table(title="Summary", title_justify="left", pad_edge=False)
    for column in ("stage", "track", "final state", "qualified", "clusters by status"):
        table.add_column(column, no_wrap=column != "clusters by status")
    for stage in doc["stages"]:
        for index, name in enumerate(TRACK_NAMES):
            track = stage["tracks"][name]
            table.add_row(
                stage["name"] if index == 0 else "",
                name,
                state_text(track["state"]),
                ", ".join(track["qualified"]) or "-",
                counts_text(track["counts"]),
            )
        table.add_section()
    return table


def attention_table(rows: Sequence[Attention]) -> RenderableType:
    if not rows:
        return Text("No failed upgrades and no outages.", style="green")
    table = Table(title="Needs attention", title_justify="left", pad_edge=False)
    for column in ("cluster", "what", "status now", "reason"):
        table.add_column(column, no_wrap=column != "reason")
    for row in rows:
        table.add_row(row.cluster, row.kind, Text(row.status, style=_STATUS_STYLE.get(row.status, "")), row.reason)
    return table
