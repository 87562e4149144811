"""Kubernetes versions as GKE spells them: `1.31.13-gke.1023000` or plain `1.31.13`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

_PATTERN = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-gke\.(\d+))?")
_MINOR = re.compile(r"(\d+)\.(\d+)")


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
