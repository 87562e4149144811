"""JSON from the bus parsed within bounds, so that no record can exhaust or crash a consumer (BUS-4).

Python's `json` accepts what would stop a service: an array nested 10,000 deep raises
`RecursionError` inside the recursive parser, a 5,000-digit integer raises `ValueError` (CPython
refuses to convert integers of over 4,300 digits, and converting long ones takes quadratic
time), and `NaN` / `Infinity` are read although JSON has no such values. So, before parsing, the
nesting depth and the longest string are measured on the raw text (with regular expressions and
C-level iteration: about 10 ms for a 1 MB value), and while parsing every number literal goes
through a hook that checks its length first. Each refusal is an `InvalidInputError` whose text
starts with "value exceeds a bound" or "value holds", so the dead-letter reason says which.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import re
from collections.abc import Sequence
from typing import Any

from rollout_common.errors import InvalidInputError

MAX_DEPTH = 32  # our deepest message, a sequence change with partition selectors, nests 11 deep
MAX_NUMBER_CHARS = 40  # an int64 has 20 characters with its sign, a double's repr at most 24
MAX_STRING_BYTES = 65_536  # one string literal as written (quotes and escapes included)

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting_depth(value: bytes) -> int:
    """How deep arrays and objects nest in the text (brackets inside strings not counted)."""
    brackets = _STRING.sub(b"", value).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def longest_string(value: bytes) -> int:
    return max(map(len, _STRING.findall(value)), default=0)


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise InvalidInputError(f"value exceeds a bound: a number of {len(text)} characters (limit {MAX_NUMBER_CHARS})")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise InvalidInputError(f"value exceeds a bound: a number of {len(text)} characters (limit {MAX_NUMBER_CHARS})")
    number = float(text)
    if not math.isfinite(number):
        raise InvalidInputError(f"value holds {text}, which overflows a double")
    return number


def _constant(text: str) -> Any:
    raise InvalidInputError(f"value holds {text}, which JSON does not allow")


# A number literal of more than MAX_NUMBER_CHARS characters has a run of at least this many digits:
# besides its digits it holds at most a sign, a point, an `e` and the exponent's sign, in 3 runs.
_LONG_DIGITS = b"0" * ((MAX_NUMBER_CHARS - 4) // 3 + 1)
_DIGITS_AS_ZERO = bytes(ord("0") if chr(b).isdigit() and b < 128 else ord(" ") for b in range(256))


def plainly_within(value: bytes) -> bool:
    """True when a cheap look at the raw text shows every bound holds (brackets and digits inside
    strings counted too, so it can say False for a value that is within them): such a value can be
    handed to a JSON parser without the checks of `parse`."""
    return (
        len(value) <= MAX_STRING_BYTES
        and value.count(b"[") + value.count(b"{") <= MAX_DEPTH
        and _no_refused_literal(value)
    )


def _no_refused_literal(text: bytes) -> bool:
    """No NaN, no Infinity, no run of digits long enough to be a number over the length bound."""
    return b"NaN" not in text and b"Infinity" not in text and _LONG_DIGITS not in text.translate(_DIGITS_AS_ZERO)


def each_plainly_within(values: Sequence[bytes]) -> bool:
    """`plainly_within` of every value, looked at together: the sizes and bracket counts one by one
    in C-level loops, the literals it refuses searched for once in all of them. They are joined by a
    space, which is in none of those literals and ends a run of digits, so no match spans two values."""
    if not values:
        return True
    if max(map(len, values)) > MAX_STRING_BYTES:
        return False
    brackets = map(
        operator.add, map(bytes.count, values, itertools.repeat(b"[")), map(bytes.count, values, itertools.repeat(b"{"))
    )
    if max(brackets) > MAX_DEPTH:
        return False
    return _no_refused_literal(b" ".join(values))


def parse(value: bytes) -> Any:
    """The JSON value, or InvalidInputError naming the bound crossed or the syntax error."""
    depth = nesting_depth(value)
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"value exceeds a bound: nesting {depth} deep (limit {MAX_DEPTH})")
    longest = longest_string(value)
    if longest > MAX_STRING_BYTES:
        raise InvalidInputError(f"value exceeds a bound: a string of {longest} bytes (limit {MAX_STRING_BYTES})")
    try:
        return json.loads(value, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"value is not JSON: {exc}") from exc


__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "MAX_STRING_BYTES",
    "each_plainly_within",
    "nesting_depth",
    "parse",
    "plainly_within",
]
