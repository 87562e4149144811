"""What one upgrade is about: a cluster, a track and the version it goes to.

The names are checked strictly before they reach a store key or a driver's argv: a cluster name
is a DNS-like label (letters, digits, `.`, `_`, `-`, not starting with punctuation, so it can
never read as an option), a version is exactly what `rollout_common.version` accepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rollout_common.errors import InvalidInputError
from rollout_common.status import Track
from rollout_common.version import VersionError, parse_version

CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def check_cluster_name(name: str) -> str:
    if not CLUSTER_NAME.fullmatch(name):
        raise InvalidInputError(f"cluster name {name!r} does not match {CLUSTER_NAME.pattern}")
    return name


def check_version(text: str) -> str:
    try:
        parsed = parse_version(text)
    except VersionError as exc:
        raise InvalidInputError(str(exc)) from exc
    # parse_version forgives surrounding blanks; an argv element must be exactly the version.
    if parsed.text != text:
        raise InvalidInputError(f"version {text!r} has surrounding blanks")
    return text


@dataclass(frozen=True, slots=True)
class UpgradeTarget:
    cluster: str
    track: Track
    version: str

    @classmethod
    def checked(cls, *, cluster: str, track: Track, version: str) -> UpgradeTarget:
        """The target, or InvalidInputError naming the offending field."""
        return cls(check_cluster_name(cluster), track, check_version(version))

    @property
    def key(self) -> str:
        # ':' cannot occur in a checked name or version, so the parts never run together.
        return f"{self.track.value}:{self.version}:{self.cluster}"
