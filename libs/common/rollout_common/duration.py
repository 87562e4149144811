"""Durations written as `14d`, `4h`, `30m`, `90s` or combined (`14d10m`)."""

from __future__ import annotations

import re

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)([smhd])")
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?[smhd])+(?![\s\S])"
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

DAY = 86400.0


def parse_duration(text: object, *, field: str = "duration") -> float:
    """Seconds in a duration; numbers are taken as seconds already."""
    if isinstance(text, bool):
        raise ValueError(f"{field}: {text!r} is not a duration")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"{field}: {text} is negative")
        return float(text)
    if not isinstance(text, str):
        raise ValueError(f"{field}: {text!r} is not a duration like '7d' or '14d10m'")
    cleaned = text.strip()
    parts = _PART.findall(cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise ValueError(f"{field}: {text!r} is not a duration like '7d', '4h', '30m' or '14d10m'")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


def format_duration(seconds: float) -> str:
    """The shortest `1d2h3m4s` spelling; `0s` for zero."""
    remaining = round(seconds)
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out) or "0s"
