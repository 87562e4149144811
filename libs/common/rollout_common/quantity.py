"""Fleet's count-or-percentage values and the one rounding rule every limit uses (SPEC section 7)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import WithJsonSchema

_PERCENT = re.compile(r"([0-9]+(?:\.[0-9]+)?)%")
_END = r"(?![\s\S])"  # not `$`: in Python it also matches before a final newline
PERCENT_PATTERN = f"^{_PERCENT.pattern}{_END}"
# a percentage above 0: some digit other than 0 before the %
POSITIVE_PERCENT_PATTERN = f"^(?=[0-9.]*[1-9]){_PERCENT.pattern}{_END}"

COUNT_OR_PERCENT_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": PERCENT_PATTERN}],
    "description": "a count of clusters (integer >= 0) or a percentage such as '10%'",
}
POSITIVE_COUNT_OR_PERCENT_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": POSITIVE_PERCENT_PATTERN}],
    "description": "a count of clusters (integer >= 1) or a percentage above 0 such as '25%'",
}

CountOrPercent = Annotated[int | str, WithJsonSchema(COUNT_OR_PERCENT_SCHEMA)]


def check_count_or_percent(value: object, *, field: str) -> CountOrPercent:
    """Return the value when it is a count (int >= 0) or a percentage string `"p%"` (p >= 0).

    Numeric strings without `%` are rejected on purpose: Fleet's code reads them as counts but its
    documentation does not allow them, and we follow the documentation.
    """
    if isinstance(value, bool):
        raise ValueError(f"{field}: {value!r} is a boolean, expected a count or a percentage like '10%'")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{field}: {value} is negative, expected a count >= 0 or a percentage")
        return value
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        return value
    raise ValueError(f"{field}: {value!r} is neither a count (integer >= 0) nor a percentage like '10%'")


def resolve(value: CountOrPercent, total: int) -> int:
    """Resolve against `total`: counts clamp to [0, total]; p% > 0 gives floor(total*p/100) in [1, total]."""
    if total <= 0:
        return 0
    if isinstance(value, int):
        return max(0, min(value, total))
    match = _PERCENT.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a count or a percentage")
    percent = float(match.group(1))
    if percent <= 0:
        return 0
    # the epsilon keeps 49% of 100 at 49 despite binary floating point
    return max(1, min(total, math.floor(total * percent / 100 + 1e-9)))
