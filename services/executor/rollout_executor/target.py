"""What one upgrade is about: a cluster, a track and the version it goes to.

The names are checked strictly (`rollout_common.safe_names`) before they reach a store key or a
driver's argv.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout_common.safe_names import check_cluster_name, check_version
from rollout_common.status import Track


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


__all__ = ["UpgradeTarget", "check_cluster_name", "check_version"]
