"""The page as HTML, rendered on the server: every value from the status document goes through `esc`.

The words are those of `rollout status` (its wording functions are reused, not copied): a wait
reads the same on the page as in the terminal.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from rollout_adapters.web_dashboard.feed import ATTENTION_KINDS, ClusterQuery, ClusterRow, Snapshot, page_of
from rollout_adapters.web_dashboard.timeline import css_token, timeline_svg
from rollout_common.status_words import (
    TRACK_NAMES,
    approval_text,
    check_condition_text,
    check_counts_text,
    check_result_text,
    check_rows,
    clock_text,
    gate_rows,
    named_total,
    names_text,
    ordered_statuses,
    partition_counts,
    timing_text,
    until_text,
    wait_lines,
)

Doc = Mapping[str, Any]
FIRST_PAGE = 50
# STAT-1 statuses a person may filter the attention list by, besides the kinds
_STATUSES = ("FAILED", "NOT_READY", "PAUSED", "INELIGIBLE", "IN_PROGRESS", "OUT_OF_SYNC", "PENDING")


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def page(snapshot: Snapshot, *, title: str) -> str:
    doc = snapshot.doc
    stages = [str(stage["name"]) for stage in doc.get("stages", [])]
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title>
<link rel="stylesheet" href="/static/dashboard.css">
<script type="module" src="/static/dashboard.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<h1>{esc(title)}</h1>
<p id="live-state" role="status" aria-live="polite">live updates every few seconds</p>
</header>
<main id="main" data-etag="{esc(snapshot.etag)}">
<div id="live">{live_sections(snapshot)}</div>
{attention_section(snapshot.rows, stages=stages)}
</main>
<footer class="bottom"><p>Read-only view. The same data as JSON:
<a href="/api/status">/api/status</a> and <a href="/api/clusters">/api/clusters</a>.</p></footer>
</body>
</html>
"""


def live_sections(snapshot: Snapshot) -> str:
    """Everything that moves with the status document; swapped in whole when its ETag changes."""
    doc = snapshot.doc
    clock = float(doc.get("now") or 0.0)
    parts = [
        _summary(doc, clock=clock),
        _pipeline(doc, clock=clock),
        _waits(doc, clock=clock),
        _gates(doc, clock=clock),
        _checks(doc),
        _partitions(doc),
        _timeline(doc, clock=clock),
    ]
    return "\n".join(parts)


def _summary(doc: Doc, *, clock: float) -> str:
    rollouts = "".join(
        f'<li><span class="rollout-id">{esc(r["id"])}</span> '
        f'<span class="badge state-{css_token(str(r["state"]))}">{esc(r["state"])}</span> '
        f"release {esc(', '.join(r.get('versions') or []))}"
        + (f' <span class="muted">({esc(r["reason"])})</span>' if r.get("reason") else "")
        + "</li>"
        for r in doc.get("rollouts") or []
    )
    if not rollouts:
        rollouts = "<li>No rollout yet: publish a release target to start one.</li>"
    wake = doc.get("nextWakeUp")
    wake_line = (
        f'<p id="next-wake">Next wake-up: {esc(until_text(wake["at"], clock=clock))}, when {esc(wake["why"])}</p>'
        if wake
        else ""
    )
    return f"""<section aria-labelledby="h-summary" class="summary">
<h2 id="h-summary">Sequence {esc(doc.get("sequence", ""))}</h2>
<p id="as-of">As of <time>{esc(clock_text(clock))}</time> · batch {esc(doc.get("batch", 0))} ·
{esc(doc.get("clusters", 0))} clusters · channel {esc(doc.get("channel", ""))}</p>
<ul class="rollouts">{rollouts}</ul>
{wake_line}
</section>"""


def _pipeline(doc: Doc, *, clock: float) -> str:
    stages = "".join(_stage_card(stage, clock=clock) for stage in doc.get("stages", []))
    return f"""<section aria-labelledby="h-pipeline">
<h2 id="h-pipeline">Pipeline</h2>
<ol class="pipeline">{stages}</ol>
</section>"""


def _stage_card(stage: Mapping[str, Any], *, clock: float) -> str:
    tracks = "".join(_track_block(name, stage["tracks"][name], clock=clock) for name in TRACK_NAMES)
    return (
        f'<li class="stage" data-stage="{esc(stage["name"])}"><h3>{esc(stage["name"])}</h3>'
        f'<p class="muted">{esc(stage.get("clusters", 0))} clusters</p>{tracks}</li>'
    )


def _track_block(name: str, track: Mapping[str, Any], *, clock: float) -> str:
    state = str(track["state"])
    counts = track.get("counts") or {}
    count_items = "".join(
        f'<li class="status-{css_token(s)}">{esc(s)} <b>{esc(counts[s])}</b></li>' for s in ordered_statuses(counts)
    )
    timing = timing_text(track, clock)
    soak = f"<dt>soak ends</dt><dd>{esc(clock_text(track['soakEnd']))}</dd>" if track.get("soakEnd") is not None else ""
    return f"""<div class="track" data-track="{esc(name)}">
<p class="track-head"><span class="track-name">{esc(name)}</span>
<span class="badge state-{css_token(state)}" data-state="{esc(state)}">{esc(state)}</span></p>
<dl><dt>version</dt><dd>{esc(track.get("version") or "-")}</dd>{soak}
<dt>timing</dt><dd>{esc(timing or "-")}</dd></dl>
<ul class="counts" aria-label="clusters by status">{count_items}</ul>
</div>"""


def _waits(doc: Doc, *, clock: float) -> str:
    rows = wait_lines(doc)
    if not rows:
        body = '<p id="no-waits">Nothing is waiting on a gate right now.</p>'
    else:
        body = (
            '<table id="waits"><caption>Why each stage and track is waiting (STAT-5)</caption>'
            '<thead><tr><th scope="col">stage/track</th><th scope="col">rule</th><th scope="col">why</th></tr></thead>'
            f"<tbody>{''.join(_wait_row(where, wait, clock=clock) for where, wait in rows)}</tbody></table>"
        )
    return f"""<section aria-labelledby="h-waits">
<h2 id="h-waits">Waiting</h2>
{body}
</section>"""


def _wait_row(where: str, wait: Mapping[str, Any], *, clock: float) -> str:
    extra = ""
    if wait.get("clusters"):
        extra += (
            f'<br><span class="muted">clusters: {esc(names_text(wait["clusters"], total=named_total(wait)))}</span>'
        )
    if wait.get("until") is not None:
        extra += f'<br><span class="muted">until {esc(until_text(wait["until"], clock=clock))}</span>'
    numbers = wait.get("numbers") or {}
    if numbers:
        shown = ", ".join(
            f"{key} {_number_text(key, value)}" for key, value in numbers.items() if not isinstance(value, list | dict)
        )
        extra += f'<br><span class="muted numbers">{esc(shown)}</span>' if shown else ""
    return (
        f'<tr class="wait" data-rule="{esc(wait["rule"])}" data-where="{esc(where)}"><th scope="row">{esc(where)}</th>'
        f'<td><span class="badge rule">{esc(wait["rule"])}</span></td><td>{esc(wait["message"])}{extra}</td></tr>'
    )


def _number_text(key: str, value: object) -> str:
    """Instants (`forcedSoakAt`, a gate's `since`, a budget's `until`, ...) as a date a person reads;
    counts as they are."""
    instant = key.endswith("At") or key in ("since", "until")
    if instant and isinstance(value, int | float) and math.isfinite(value):
        return clock_text(float(value))
    return str(value)


def _gates(doc: Doc, *, clock: float) -> str:
    """CHK-1: every approval gate a rollout reached, since when it waits, who approved it when and why."""
    rows = gate_rows(doc)
    if not rows:
        return ""
    body = "".join(_gate_row(stage, gate, clock=clock) for stage, gate in rows)
    return f"""<section aria-labelledby="h-gates">
<h2 id="h-gates">Approval gates</h2>
<table id="gates"><caption>Each gate a rollout reached (CHK-1): waiting, or approved by whom and when</caption>
<thead><tr><th scope="col">stage</th><th scope="col">gate</th><th scope="col">rollout</th>
<th scope="col">waiting since</th><th scope="col">approval</th></tr></thead>
<tbody>{body}</tbody></table>
</section>"""


def _gate_row(stage: str, gate: Mapping[str, Any], *, clock: float) -> str:
    approved = "approved" if gate.get("approvedAt") is not None else "waiting"
    return (
        f'<tr class="gate" data-stage="{esc(stage)}" data-gate="{esc(gate["gate"])}" data-approval="{approved}">'
        f'<th scope="row">{esc(stage)}</th><td>{esc(gate["gate"])}</td><td>{esc(gate["rollout"])}</td>'
        f"<td>{esc(clock_text(float(gate['waitingSince'])))}</td>"
        f'<td><span class="badge state-{approved}">{approved}</span> {esc(approval_text(gate, clock=clock))}</td></tr>'
    )


def _checks(doc: Doc) -> str:
    """CHK-2: each metric check's latest value against its condition, and how near it is to halting."""
    rows = check_rows(doc)
    if not rows:
        return ""
    body = "".join(_check_row(stage, check) for stage, check in rows)
    return f"""<section aria-labelledby="h-checks">
<h2 id="h-checks">Metric checks</h2>
<table id="checks"><caption>The latest result of each check against its condition (CHK-2)</caption>
<thead><tr><th scope="col">stage</th><th scope="col">check</th><th scope="col">rollout</th>
<th scope="col">latest result</th><th scope="col">condition</th><th scope="col">in a row</th></tr></thead>
<tbody>{body}</tbody></table>
</section>"""


def _check_row(stage: str, check: Mapping[str, Any]) -> str:
    outcome = str(check.get("outcome") or "none")
    return (
        f'<tr class="check" data-stage="{esc(stage)}" data-check="{esc(check["check"])}" '
        f'data-outcome="{esc(outcome)}"><th scope="row">{esc(stage)}</th><td>{esc(check["check"])}</td>'
        f"<td>{esc(check['rollout'])}</td><td>{esc(check_result_text(check))}</td>"
        f"<td>{esc(check_condition_text(check))}</td><td>{esc(check_counts_text(check))}</td></tr>"
    )


def _partitions(doc: Doc) -> str:
    tables = "".join(_partition_table(stage) for stage in doc.get("stages", []))
    return f"""<section aria-labelledby="h-partitions">
<h2 id="h-partitions">Partitions</h2>
<p class="muted">Per track: clusters not done, then Ready or NotReady (NotReady: more not done than
maxUnavailable, GATE-2). Unavailable counts either track (STAT-3).</p>
<div class="partition-grid">{tables}</div>
</section>"""


def _partition_table(stage: Mapping[str, Any]) -> str:
    tracks = [stage["tracks"][name] for name in TRACK_NAMES]
    rows = []
    for index, partition in enumerate(tracks[0]["partitions"]):
        cells = "".join(_partition_cell(t["partitions"][index], reached=t["state"] != "PENDING") for t in tracks)
        rows.append(
            f'<tr><th scope="row">{esc(partition["name"])}</th><td>{esc(partition["clusters"])}</td>'
            f"<td>{esc(partition['maxUnavailable'])}</td><td>{esc(partition['unavailable'])}</td>{cells}</tr>"
        )
    head = "".join(f'<th scope="col">{esc(name)}</th>' for name in TRACK_NAMES)
    return (
        f'<div class="table-wrap"><table class="partitions" data-stage="{esc(stage["name"])}">'
        f'<caption>{esc(stage["name"])}</caption><thead><tr><th scope="col">partition</th>'
        f'<th scope="col">size</th><th scope="col">maxUnavailable</th><th scope="col">unavailable</th>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _partition_cell(partition: Mapping[str, Any], *, reached: bool) -> str:
    if not reached:
        return '<td class="muted">not reached</td>'
    done, not_ready, waiting = partition_counts(partition)
    ready = "Ready" if partition["ready"] else "NotReady"
    meter = f'<meter min="0" max="{esc(partition["clusters"])}" value="{esc(done)}" aria-label="done"></meter>'
    return (
        f"<td>{meter} {esc(partition['notDone'])} not done "
        f'<span class="badge {css_token(ready)}">{ready}</span>'
        f'<span class="muted"> ({esc(done)} done, {esc(not_ready)} not ready, {esc(waiting)} waiting)</span></td>'
    )


def _timeline(doc: Doc, *, clock: float) -> str:
    return f"""<section aria-labelledby="h-timeline">
<h2 id="h-timeline">Timeline</h2>
{timeline_svg(doc, clock=clock)}
</section>"""


def attention_section(rows: Sequence[ClusterRow], *, stages: Iterable[str]) -> str:
    first = page_of(rows, ClusterQuery(limit=FIRST_PAGE))
    stage_options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in stages)
    status_options = "".join(f'<option value="{s}">{s}</option>' for s in (*ATTENTION_KINDS, *_STATUSES))
    return f"""<section aria-labelledby="h-attention" class="attention">
<h2 id="h-attention">Clusters needing attention</h2>
<form id="cluster-filter" role="search" aria-label="filter clusters needing attention">
<div class="field"><label for="f-name">Name</label>
<input id="f-name" name="name" type="search" autocomplete="off"></div>
<div class="field"><label for="f-label">Label</label>
<input id="f-label" name="label" type="search" placeholder="key=value" autocomplete="off"></div>
<div class="field"><label for="f-stage">Stage</label>
<select id="f-stage" name="stage"><option value="">any</option>{stage_options}</select></div>
<div class="field"><label for="f-status">Status</label>
<select id="f-status" name="status"><option value="">any</option>{status_options}</select></div>
</form>
<p id="cluster-count" role="status" aria-live="polite">{_count_text(first)}</p>
<div class="table-wrap"><table id="clusters">
<thead><tr><th scope="col">cluster</th><th scope="col">kind</th><th scope="col">status</th>
<th scope="col">stage</th><th scope="col">partition</th><th scope="col">labels</th>
<th scope="col">detail</th></tr></thead>
<tbody id="cluster-rows">{"".join(cluster_row(row) for row in first["clusters"])}</tbody>
</table></div>
<nav class="pager" aria-label="pages of clusters">
<button type="button" id="prev-page">Previous</button>
<button type="button" id="next-page">Next</button>
</nav>
</section>"""


def _count_text(page: Mapping[str, Any]) -> str:
    shown = len(page["clusters"])
    start = page["offset"] + 1 if shown else 0
    return f"{start}-{page['offset'] + shown} of {page['matched']} matching ({page['total']} need attention)"


def cluster_row(row: Mapping[str, Any]) -> str:
    labels = ", ".join(f"{k}={v}" for k, v in sorted(row["labels"].items()))
    return (
        f'<tr><th scope="row">{esc(row["name"])}</th><td>{esc(row["kind"])}</td><td>{esc(row["status"])}</td>'
        f"<td>{esc(row['stage'] or '-')}</td><td>{esc(row['partition'] or '-')}</td><td>{esc(labels)}</td>"
        f"<td>{esc(row['detail'])}</td></tr>"
    )


__all__ = ["cluster_row", "esc", "live_sections", "page"]
