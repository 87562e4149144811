"""Rich rendering of a rollout status document: the one status screen and the demo's summary.

The input is the planner's status document (SPEC STAT-2..5, built by
`rollout_planner.service.status_document`): rollouts, `stage_view` per stage, the next wake-up and the
clusters that need attention. `rollout status` draws it as stored, `rollout demo` as the simulator
goes, `rollout watch` as progress events move it on (`progress_model`): one renderer, one look.
Nothing here touches the engine; every key beyond `now` and `stages` is optional.
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

from rollout_cli import tables
from rollout_cli.gate_tables import checks_table, gates_table
from rollout_common.status_words import (
    TRACK_NAMES,
    clock_text,
    named_total,
    names_text,
    ordered_statuses,
    partition_counts,
    timing_text,
    until_text,
    version_mismatch_text,
    wait_lines,
)

Doc = Mapping[str, Any]

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
_ROLLOUT_STYLE = {"RUNNING": "bold cyan", "PAUSED": "yellow", "CANCELLED": "red", "COMPLETED": "bold green"}
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
# a live view must fit a 40-row terminal: header-rule-only tables, a few recent events
_LIVE_BOX = box.SIMPLE_HEAD
MAX_PARTITION_ROWS = 8
_ATTENTION_ROWS = 5
NAMES_LISTED = 20  # the status document's cap per list of cluster names


@dataclass(frozen=True, slots=True)
class Attention:
    """One cluster the summary points at (a failed upgrade, an outage), with the reason in words."""

    cluster: str
    kind: str
    status: str
    reason: str


def state_text(state: str) -> Text:
    return Text(state, style=_STATE_STYLE.get(state, ""))


def counts_text(counts: Mapping[str, int]) -> Text:
    out = Text()
    for status in ordered_statuses(counts):
        if out:
            out.append("  ")
        out.append(f"{status} {counts[status]}", style=_STATUS_STYLE.get(status, ""))
    return out


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
                timing_text(track, clock),
                counts_text(track["counts"]),
            )
    return tables.folding(table)


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


def _partition_cell(partition: Mapping[str, Any], *, reached: bool) -> Text:
    """Bar, then how many clusters are not done on this track, then GATE-2 Ready or NotReady."""
    if not reached:
        return Text("░" * _BAR_WIDTH + " not reached", style="dim")
    done, not_ready, _ = partition_counts(partition)
    cell = partition_bar(size=partition["clusters"], done=done, not_ready=not_ready)
    not_done = partition["notDone"]
    cell.append(f" {not_done:>4}", style="" if not_done else "green")
    cell.append(" Ready" if partition["ready"] else " NotReady", style="green" if partition["ready"] else "bold red")
    return cell


def _partition_rows(tracks: Sequence[Mapping[str, Any]]) -> tuple[list[int], int]:
    """Which partitions of a stage get a row: all of them, or on a long list the unfinished ones first."""
    count = len(tracks[0]["partitions"])
    if count <= MAX_PARTITION_ROWS:
        return list(range(count)), 0

    def finished(index: int) -> bool:
        return all(t["partitions"][index]["notDone"] == 0 for t in tracks)

    busy = [i for i in range(count) if not finished(i)]
    shown = sorted((busy or list(range(count)))[:MAX_PARTITION_ROWS])
    return shown, count - len(shown)


def partitions_table(doc: Doc) -> Table:
    table = _partitions_frame()
    for stage in doc["stages"]:
        _add_partition_rows(table, stage)
    return tables.folding(table)


def _partitions_frame() -> Table:
    table = Table(
        box=_LIVE_BOX,
        expand=True,
        pad_edge=False,
        show_edge=False,
        caption_justify="left",
        caption="per track: bar of done / not ready / waiting, then the clusters not done; "
        "NotReady = more not done than maxUnavailable (GATE-2)",
    )
    table.add_column("stage", no_wrap=True)
    table.add_column("partition", no_wrap=True, min_width=9)
    table.add_column("size", justify="right", min_width=4)
    table.add_column("maxUnav", justify="right", min_width=7)
    table.add_column("unavail", justify="right", min_width=7)
    for name in TRACK_NAMES:
        table.add_column(f"{name}: not done", no_wrap=True)
    return table


def _add_partition_rows(table: Table, stage: Mapping[str, Any]) -> None:
    tracks = [stage["tracks"][name] for name in TRACK_NAMES]
    rows, hidden = _partition_rows(tracks)
    for position, index in enumerate(rows):
        partition = tracks[0]["partitions"][index]
        cells = [_partition_cell(t["partitions"][index], reached=t["state"] != "PENDING") for t in tracks]
        unavailable = partition["unavailable"]
        table.add_row(
            Text(stage["name"], style="bold") if position == 0 else "",
            partition["name"],
            str(partition["clusters"]),
            str(partition["maxUnavailable"]),
            Text(str(unavailable), style="yellow" if unavailable > partition["maxUnavailable"] else ""),
            *cells,
        )
    if hidden:
        table.add_row("", Text(f"+{hidden} finished partition(s)", style="dim"), "", "", "", "", "")


def waits_table(doc: Doc, *, clock: float | None = None) -> RenderableType:
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
            reason.append(f"\n  clusters: {names_text(wait['clusters'], total=named_total(wait))}", style="dim")
        if wait.get("until") is not None:
            reason.append(f"\n  until {until_text(wait['until'], clock=clock)}", style="dim")
        table.add_row(where, Text(wait["rule"], style="yellow"), reason)
    return tables.folding(table)


def rollouts_text(doc: Doc, *, clock: float | None = None, limit: int = 3) -> Text:
    """One line per rollout (STAT-4): id, state, the release it carries, how far it got."""
    rollouts = list(doc.get("rollouts") or [])
    if not rollouts:
        return Text("No rollout yet: publish a release target (rollout release) to start one.", style="dim")
    out = Text()
    # the running ones matter most; finished ones after them
    ordered = sorted(rollouts, key=lambda r: (r["state"] not in ("RUNNING", "PAUSED"), -r.get("createdAt", 0)))
    for rollout in ordered[:limit]:
        if out:
            out.append("\n")
        out.append("rollout ")
        out.append(rollout["id"], style="bold")
        out.append(" ")
        out.append(rollout["state"], style=_ROLLOUT_STYLE.get(rollout["state"], ""))
        out.append(f"  release {_release_text(rollout)}")
        if rollout.get("reason"):
            out.append(f"  ({rollout['reason']})", style="dim")
        out.append(_stage_progress(rollout, clock=clock), style="dim")
    if len(rollouts) > limit:
        out.append(f"\n+{len(rollouts) - limit} more rollout(s) (--json lists all)", style="dim")
    return out


def _release_text(rollout: Mapping[str, Any]) -> str:
    targets = rollout.get("targets") or {}
    if targets:
        return ", ".join(f"{minor} -> {version}" for minor, version in targets.items())
    return ", ".join(rollout.get("versions") or []) + (" (on demand)" if rollout.get("onDemand") else "")


def _stage_progress(rollout: Mapping[str, Any], *, clock: float | None) -> str:
    """`test: cp 08:00-09:10, nodes 08:00-09:40 · staging: cp 09:10-, ...` (times of the clock's day as HH:MM)."""
    by_stage: dict[str, list[str]] = {}
    for stage in rollout.get("stages") or []:
        start, end = stage.get("startedAt"), stage.get("finishedAt")
        span = "" if start is None else f" {_moment(start, clock)}-{'' if end is None else _moment(end, clock)}"
        track = "cp" if stage["track"] == "controlPlane" else stage["track"]
        by_stage.setdefault(stage["stage"], []).append(f"{track} {stage['state']}{span}")
    if not by_stage:
        return ""
    return "\n  " + " · ".join(f"{name}: {', '.join(tracks)}" for name, tracks in by_stage.items())


def _moment(epoch: float, clock: float | None) -> str:
    moment = dt.datetime.fromtimestamp(epoch, tz=dt.UTC)
    same_day = clock is not None and dt.datetime.fromtimestamp(clock, tz=dt.UTC).date() == moment.date()
    return moment.strftime("%H:%M" if same_day else "%m-%d %H:%M")


def attention_text(doc: Doc, *, clock: float | None) -> RenderableType | None:
    """Failed upgrades with their errors, upgraded clusters reporting another version, clusters paused
    by a window or for deprecated API use."""
    block = doc.get("attention")
    if not block:
        return None
    rows = [*_failed_rows(block), *_mismatch_rows(block)]
    paused = (_window_row(block, clock=clock), _budget_row(block, clock=clock), _deprecated_row(block))
    rows += [row for row in paused if row is not None]
    if not rows:
        return None
    return Text("\n").join(rows)


def _failed_rows(block: Mapping[str, Any]) -> list[Text]:
    rows: list[Text] = []
    for failed in block.get("failed", [])[:_ATTENTION_ROWS]:
        line = Text("FAILED ", style="bold red")
        line.append(f"{failed['cluster']} {failed['track']}")
        if failed.get("version"):
            line.append(f" -> {failed['version']}")
        line.append(f": {failed['error']}")
        rows.append(line)
    return rows + _more(block.get("failedTotal", 0), min(len(block.get("failed", [])), _ATTENTION_ROWS), "failed")


def _mismatch_rows(block: Mapping[str, Any]) -> list[Text]:
    rows: list[Text] = []
    mismatched = block.get("versionMismatch", [])  # absent in documents of planners before it
    for entry in mismatched[:_ATTENTION_ROWS]:
        line = Text("NOT_READY ", style="bold yellow")
        line.append(
            version_mismatch_text(
                entry["cluster"], entry["track"], expected=entry["expected"], reported=entry["reported"]
            )
        )
        rows.append(line)
    return rows + _more(
        block.get("versionMismatchTotal", 0), min(len(mismatched), _ATTENTION_ROWS), "reporting another version"
    )


def _window_row(block: Mapping[str, Any], *, clock: float | None) -> Text | None:
    window = block.get("pausedWindow", [])
    if not window:
        return None
    first = window[0]
    opens = "never (an exclusion with no end)" if first["until"] is None else until_text(first["until"], clock=clock)
    line = Text("PAUSED ", style="yellow")
    line.append(
        f"MAINTENANCE_POLICY {block.get('pausedWindowTotal', len(window))} cluster track(s): "
        f"{names_text([w['cluster'] for w in window], total=block.get('pausedWindowTotal'))}; "
        f"next window opens {opens}"
    )
    return line


def _budget_row(block: Mapping[str, Any], *, clock: float | None) -> Text | None:
    budget = block.get("pausedBudget", [])
    if not budget:
        return None
    total = block.get("pausedBudgetTotal", len(budget))
    line = Text("PAUSED ", style="yellow")
    line.append(
        f"DISRUPTION_BUDGET {total} cluster track(s): {names_text([b['cluster'] for b in budget], total=total)}; "
        f"the first budget ends {until_text(budget[0]['until'], clock=clock)}"
    )
    return line


def _deprecated_row(block: Mapping[str, Any]) -> Text | None:
    deprecated = block.get("pausedDeprecated", [])
    if not deprecated:
        return None
    line = Text("PAUSED ", style="yellow")
    line.append(
        f"DEPRECATED_API {block.get('pausedDeprecatedTotal', len(deprecated))} cluster(s): "
        f"{names_text(deprecated, total=block.get('pausedDeprecatedTotal'))}; "
        "fix their workloads, then clear the flag in the inventory"
    )
    return line


def _more(total: int, shown: int, what: str) -> list[Text]:
    return [Text(f"  +{total - shown} more {what} (--json lists {NAMES_LISTED})", style="dim")] if total > shown else []


def wake_text(doc: Doc, *, clock: float | None) -> Text | None:
    wake = doc.get("nextWakeUp")
    if not wake:
        return None
    out = Text("next wake-up: ", style="bold")
    out.append(f"{until_text(wake['at'], clock=clock)}, when {wake['why']}")
    return out


def status_view(
    doc: Doc,
    *,
    clock: float,
    title: str,
    clock_label: str = "as of",
    origin: float | None = None,
    recent: Iterable[str] = (),
    footer: str = "",
) -> RenderableType:
    """The one screen `rollout status`, `rollout watch` and `rollout demo` draw."""
    parts = _status_parts(doc, clock=clock)
    lines = list(recent)
    if lines:
        parts.append(_recent_panel(lines))
    subtitle = Text(footer, style="dim") if footer else None
    return Panel(
        Group(*parts),
        title=f"[bold]{title}[/]  {clock_label} {clock_text(clock, origin=origin)}",
        title_align="left",
        subtitle=subtitle,
        subtitle_align="right",
    )


def _status_parts(doc: Doc, *, clock: float) -> list[RenderableType]:
    """The screen's blocks in order; the optional ones (gates, checks, attention, wake-up) when present."""
    parts: list[RenderableType] = [
        rollouts_text(doc, clock=clock),
        stages_table(doc, clock=clock),
        partitions_table(doc),
    ]
    parts.append(waits_table(doc, clock=clock))
    extras = (
        gates_table(doc, clock=clock),
        checks_table(doc),
        attention_text(doc, clock=clock),
        wake_text(doc, clock=clock),
    )
    for extra in extras:
        if extra is not None:
            parts.append(extra)
    return parts


def _recent_panel(lines: list[str]) -> Panel:
    return Panel(
        Text("\n".join(lines), overflow="ellipsis", no_wrap=True),
        title="Latest events",
        title_align="left",
        border_style="dim",
    )


def dashboard(
    doc: Doc, *, clock: float, title: str, origin: float | None = None, recent: Iterable[str] = (), footer: str = ""
) -> RenderableType:
    """The demo's live view: the status screen on the simulated clock, with the latest log lines."""
    return status_view(
        doc, clock=clock, title=title, clock_label="simulated clock", origin=origin, recent=recent, footer=footer
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
    return tables.folding(table)


def attention_table(rows: Sequence[Attention]) -> RenderableType:
    if not rows:
        return Text("No failed upgrades and no outages.", style="green")
    table = Table(title="Needs attention", title_justify="left", pad_edge=False)
    for column in ("cluster", "what", "status now", "reason"):
        table.add_column(column, no_wrap=column != "reason")
    for row in rows:
        table.add_row(row.cluster, row.kind, Text(row.status, style=_STATUS_STYLE.get(row.status, "")), row.reason)
    return tables.folding(table)
