"""Kubernetes versions as GKE spells them: `1.31.13-gke.1023000` or plain `1.31.13`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator, WithJsonSchema

_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-gke\.(\d+))?")
_MINOR = re.compile(r"(\d+)\.(\d+)")

# What a message may carry, exactly: ASCII digits, no blanks. The same text is the published JSON
# Schema's pattern, so the schema and the services accept the same versions. It ends in "nothing
# follows" rather than `$`, which in Python's regular expressions also matches before a final newline.
_END = r"(?![\s\S])"
_VERSION = r"[0-9]+\.[0-9]+\.[0-9]+(-gke\.[0-9]+)?"
_MINOR_TEXT = r"[0-9]+\.[0-9]+"
VERSION_PATTERN = f"^{_VERSION}{_END}"
MINOR_PATTERN = f"^{_MINOR_TEXT}{_END}"
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
        raise VersionError(f"{text!r} is not a version (expected MAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH-gke.BUILD)")
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
        raise VersionError(f"{text!r} is not a minor version (expected MAJOR.MINOR, e.g. 1.30)")
    return Minor(int(match.group(1)), int(match.group(2)))


def check_version_text(value: str) -> str:
    """A version as a message carries it: exactly MAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH-gke.BUILD."""
    if not _WIRE_VERSION.fullmatch(value):
        raise VersionError(f"{value!r} is not a version (expected MAJOR.MINOR.PATCH or MAJOR.MINOR.PATCH-gke.BUILD)")
    return value


def check_minor_text(value: str) -> str:
    if not _WIRE_MINOR.fullmatch(value):
        raise VersionError(f"{value!r} is not a minor version (expected MAJOR.MINOR, e.g. 1.30)")
    return value


VersionText = Annotated[
    str, AfterValidator(check_version_text), WithJsonSchema({"type": "string", "pattern": VERSION_PATTERN})
]
"""A version field of a message: validated and published with the same pattern."""

MinorText = Annotated[
    str, AfterValidator(check_minor_text), WithJsonSchema({"type": "string", "pattern": MINOR_PATTERN})
]
