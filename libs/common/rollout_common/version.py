"""Kubernetes versions as GKE spells them: `1.31.13-gke.1023000` or plain `1.31.13`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

# Every part of a version is a number of at most this many digits, wherever a version enters (a
# message, a file, a command's text). GKE's longest parts are 7-digit builds; without a bound a part
# of 5,000 digits passes a pattern and then stops whoever converts it (Python refuses integers of over
# 4,300 digits), on every redelivery.
MAX_PART_DIGITS = 12
_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-gke\.(\d+))?")
_MINOR = re.compile(r"(\d+)\.(\d+)")
_DIGIT_RUN = re.compile(r"\d+")
_SPELLINGS = "MAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH-gke.BUILD"
_SHOWN_CHARS = 40  # a refused text is shown cut to this, so a reason never carries a huge value

# What a message may carry, exactly: ASCII digits, no blanks. The same text is the published JSON
# Schema's pattern, so the schema and the services accept the same versions. It ends in "nothing
# follows" rather than `$`, which in Python's regular expressions also matches before a final newline.
_END = r"(?![\s\S])"
_PART = f"[0-9]{{1,{MAX_PART_DIGITS}}}"
_VERSION = rf"{_PART}\.{_PART}\.{_PART}(-gke\.{_PART})?"
_MINOR_TEXT = rf"{_PART}\.{_PART}"
VERSION_PATTERN = f"^{_VERSION}{_END}"
MINOR_PATTERN = f"^{_MINOR_TEXT}{_END}"
# A version as a cluster reports it, in Kubernetes' spelling (`v1.31.0+k3s1`): free text, but short
# and without a run of digits longer than a part.
MAX_REPORTED_CHARS = 128
REPORTED_PATTERN = f"^(?![\\s\\S]*[0-9]{{{MAX_PART_DIGITS + 1}}})"
_WIRE_VERSION = re.compile(_VERSION)
_WIRE_MINOR = re.compile(_MINOR_TEXT)


class VersionError(ValueError):
    """Not a version; the message says what was expected."""


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """Ordered by (major, minor, patch, build); the text is kept as given for display."""

    key: tuple[int, int, int, int]
    text: str = field(compare=False)

    @property
    def minor(self) -> Minor:
        return Minor(self.key[0], self.key[1])

    def __str__(self) -> str:
        return self.text

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True, slots=True, order=True)
class Minor:
    """`1.31`: what release targets are keyed by."""

    major: int
    number: int

    def next(self) -> Minor:
        return Minor(self.major, self.number + 1)

    def __str__(self) -> str:
        return f"{self.major}.{self.number}"


@lru_cache(maxsize=4096)
def parse_version(text: str) -> Version:
    """Parse and cache: a fleet has few distinct versions, so parsing once each is enough."""
    match = _PATTERN.fullmatch(text.strip())
    if not match:
        raise VersionError(f"{_shown(text)} is not a version (expected {_SPELLINGS})")
    _check_parts(text, match.groups(), what="a version")
    major, minor, patch, build = match.groups()
    return Version((int(major), int(minor), int(patch), int(build or 0)), text.strip())


def reject_yaml_number(value: object, *, what: str) -> object:
    """YAML reads 1.30 as the number 1.3: refuse it rather than guess which version was meant."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raise VersionError(f'{what} {value!r} was read as a number; quote it, e.g. "1.30" or "1.30.5"')
    return value


def parse_minor(text: str) -> Minor:
    match = _MINOR.fullmatch(str(text).strip())
    if not match:
        raise VersionError(f"{_shown(text)} is not a minor version (expected MAJOR.MINOR, e.g. 1.30)")
    _check_parts(text, match.groups(), what="a minor version")
    return Minor(int(match.group(1)), int(match.group(2)))


def check_version_text(value: str) -> str:
    """A version as a message carries it: exactly MAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH-gke.BUILD."""
    if not _WIRE_VERSION.fullmatch(value):
        _check_parts(value, _DIGIT_RUN.findall(value), what="a version")
        raise VersionError(f"{_shown(value)} is not a version (expected {_SPELLINGS})")
    return value


def check_minor_text(value: str) -> str:
    if not _WIRE_MINOR.fullmatch(value):
        _check_parts(value, _DIGIT_RUN.findall(value), what="a minor version")
        raise VersionError(f"{_shown(value)} is not a minor version (expected MAJOR.MINOR, e.g. 1.30)")
    return value


def check_reported_version(value: str) -> str:
    """A version as a cluster reports it: any spelling, but no part longer than a version's may be."""
    if len(value) > MAX_REPORTED_CHARS:
        raise VersionError(f"{_shown(value)} is not a version: longer than {MAX_REPORTED_CHARS} characters")
    _check_parts(value, _DIGIT_RUN.findall(value), what="a version")
    return value


def _check_parts(text: str, parts: Iterable[str | None], *, what: str) -> None:
    longest = max((len(part) for part in parts if part), default=0)
    if longest > MAX_PART_DIGITS:
        raise VersionError(f"{_shown(text)} is not {what}: a part of {longest} digits (at most {MAX_PART_DIGITS})")


def _shown(text: object) -> str:
    """The text as a reason quotes it: cut, with its length, when it is long."""
    shown = repr(text)
    if len(shown) <= _SHOWN_CHARS:
        return shown
    return f"{shown[:_SHOWN_CHARS]}... ({len(str(text))} characters)"


VersionText = Annotated[
    str, AfterValidator(check_version_text), WithJsonSchema({"type": "string", "pattern": VERSION_PATTERN})
]
"""A version field of a message: validated and published with the same pattern."""

ReportedVersionText = Annotated[
    str,
    AfterValidator(check_reported_version),
    WithJsonSchema({"type": "string", "maxLength": MAX_REPORTED_CHARS, "pattern": REPORTED_PATTERN}),
]
"""A version a cluster reports in Kubernetes' spelling (a heartbeat's): bounded as versions are."""

MinorText = Annotated[
    str, AfterValidator(check_minor_text), WithJsonSchema({"type": "string", "pattern": MINOR_PATTERN})
]
