"""What one upgrade is about: a cluster, a track and the version it goes to.

The names are checked strictly (`rollout_common.safe_names`) before they reach a store key or a
driver's argv.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout_common.errors import InvalidInputError
from rollout_common.safe_names import check_cluster_name, check_version
from rollout_common.status import Track


@dataclass(frozen=True, slots=True)
class UpgradeTarget:
    """`retry` counts the operator's retries of this upgrade (OPS-4): each retry is an attempt of its
    own in the ledger, so a retried upgrade runs once more while a redelivered one runs never again."""

    cluster: str
    track: Track
    version: str
    retry: int = 0

    @classmethod
    def checked(cls, *, cluster: str, track: Track, version: str, retry: int = 0) -> UpgradeTarget:
        """The target, or InvalidInputError naming the offending field."""
        if retry < 0:
            raise InvalidInputError(f"retry count {retry} of {cluster} is negative")
        return cls(check_cluster_name(cluster), track, check_version(version), retry)

    @property
    def key(self) -> str:
        # ':' cannot occur in a checked name or version, so the parts never run together. The first
        # attempt keeps the key it always had, so results recorded before retries existed still count.
        base = f"{self.track.value}:{self.version}:{self.cluster}"
        return base if self.retry == 0 else f"{base}:retry-{self.retry}"


__all__ = ["UpgradeTarget", "check_cluster_name", "check_version"]
