"""The rollout's timeline as inline SVG, drawn on the server: one row per stage and track (STAT-4).

A bar runs from when the track started to when it finished (or to now); its class names its
last state, the stylesheet colours it. Presentation attributes only, no inline style (CSP).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from rollout_common.status_words import TRACK_NAMES

_LABEL_W = 150
_WIDTH = 900
_ROW_H = 22
_TOP = 24
_TICKS = 5


@dataclass(frozen=True, slots=True)
class _Frame:
    """The time axis: from the first start to now (at least a minute), mapped onto the drawing's width."""

    origin: float
    end: float
    scale: float
    height: int

    @classmethod
    def of(cls, starts: list[float], *, clock: float, rows: int) -> _Frame:
        origin = min(starts)
        end = max(clock, origin + 60.0)
        return cls(origin, end, (_WIDTH - _LABEL_W - 10) / (end - origin), _TOP + _ROW_H * rows + 6)

    def x(self, at: float) -> float:
        return _LABEL_W + (at - self.origin) * self.scale


def timeline_svg(doc: Mapping[str, Any], *, clock: float) -> str:
    rows = [(stage["name"], track) for stage in doc.get("stages", []) for track in TRACK_NAMES]
    spans = _spans(doc)
    starts = [start for start, _, _ in spans.values()]
    if not rows or not starts:
        return '<p id="timeline-empty">No stage has started yet.</p>'
    frame = _Frame.of(starts, clock=clock, rows=len(rows))
    height = frame.height
    parts = [
        f'<svg id="timeline" viewBox="0 0 {_WIDTH} {height}" role="img" aria-labelledby="timeline-title" '
        'preserveAspectRatio="xMinYMin meet">',
        '<title id="timeline-title">When each stage and track started and finished</title>',
        *_ticks(frame),
    ]
    for row, (stage, track) in enumerate(rows):
        parts += _row(row, f"{stage}/{track}", spans.get((stage, track)), frame=frame, clock=clock)
    now_x = frame.x(clock)
    parts.append(f'<line class="now" x1="{now_x:.1f}" y1="{_TOP - 6}" x2="{now_x:.1f}" y2="{height}"/>')
    parts.append("</svg>")
    return "".join(parts)


def _ticks(frame: _Frame) -> list[str]:
    """Evenly spaced times along the top, the last one anchored at its end so it stays inside."""
    parts = []
    for index in range(_TICKS):
        at = frame.origin + (frame.end - frame.origin) * index / (_TICKS - 1)
        x = frame.x(at)
        label = dt.datetime.fromtimestamp(at, tz=dt.UTC).strftime("%m-%d %H:%M")
        anchor = "end" if index == _TICKS - 1 else "start"
        parts.append(f'<line class="tick" x1="{x:.1f}" y1="{_TOP - 4}" x2="{x:.1f}" y2="{frame.height}"/>')
        parts.append(f'<text class="tick-label" x="{x:.1f}" y="14" text-anchor="{anchor}">{label}</text>')
    return parts


def _row(
    row: int, name: str, span: tuple[float, float | None, str] | None, *, frame: _Frame, clock: float
) -> list[str]:
    """A stage and track's label, and its bar when it has started."""
    y = _TOP + row * _ROW_H
    parts = [f'<text class="row-label" x="4" y="{y + 15}">{escape(name)}</text>']
    if span is None:
        return parts
    start, finish, state = span
    width = max(2.0, ((finish if finish is not None else clock) - start) * frame.scale)
    parts.append(
        f'<rect class="bar state-{css_token(state)}" x="{frame.x(start):.1f}" y="{y + 3}" '
        f'width="{width:.1f}" height="{_ROW_H - 6}">'
        f"<title>{escape(f'{name} {state}')}</title></rect>"
    )
    return parts


def _spans(doc: Mapping[str, Any]) -> dict[tuple[str, str], tuple[float, float | None, str]]:
    """Per stage and track, the span of its newest run across rollouts (the one the pipeline shows)."""
    out: dict[tuple[str, str], tuple[float, float | None, str]] = {}
    for rollout in sorted(doc.get("rollouts") or [], key=lambda r: r.get("createdAt") or 0):
        for entry in rollout.get("stages") or []:
            if entry.get("startedAt") is None:
                continue
            out[(entry["stage"], entry["track"])] = (
                float(entry["startedAt"]),
                entry.get("finishedAt"),
                str(entry["state"]),
            )
    return out


def css_token(value: str) -> str:
    """A state or status as a class name suffix: letters, digits and dashes only (never markup)."""
    return "".join(c if c.isalnum() else "-" for c in value.lower())


__all__ = ["css_token", "timeline_svg"]
