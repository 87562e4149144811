"""The cluster names a probe may put into an argv or a URL: DNS-like labels only.

The same rule the executor applies (`rollout_executor.target`); a name that could read as an
option or a shell word never reaches a program.
"""

from __future__ import annotations

import re

from rollout_common.errors import InvalidInputError

CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")


def check_cluster_name(name: str) -> str:
    if not CLUSTER_NAME.fullmatch(name):
        raise InvalidInputError(f"cluster name {name!r} does not match {CLUSTER_NAME.pattern}")
    return name
