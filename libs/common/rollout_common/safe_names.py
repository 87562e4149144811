"""Checks for the names that reach a program's argv, a URL or a store key.

A cluster name is the inventory's rule (`rollout_common.fleet.CLUSTER_NAME`: letters, digits,
`.`, `_`, `-`, starting and ending with a letter or digit, so it never reads as an option or a
shell word); a version is exactly what `rollout_common.version` parses, with no blanks around it.
The executor's drivers and the health probes check again whoever built the name.
"""

from __future__ import annotations

from rollout_common.errors import InvalidInputError
from rollout_common.fleet import CLUSTER_NAME
from rollout_common.version import VersionError, parse_version


def check_cluster_name(name: str) -> str:
    """`name` itself, or InvalidInputError."""
    if not CLUSTER_NAME.fullmatch(name):
        raise InvalidInputError(f"cluster name {name!r} does not match {CLUSTER_NAME.pattern}")
    return name


def check_version(text: str) -> str:
    """`text` itself if it is a version, exactly; InvalidInputError otherwise."""
    try:
        parsed = parse_version(text)
    except VersionError as exc:
        raise InvalidInputError(str(exc)) from exc
    # parse_version forgives surrounding blanks; an argv element must be exactly the version.
    if parsed.text != text:
        raise InvalidInputError(f"version {text!r} has surrounding blanks")
    return text


__all__ = ["CLUSTER_NAME", "check_cluster_name", "check_version"]
