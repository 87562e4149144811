"""The port every readiness probe implements: is this cluster ready now?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ProbeResult:
    ready: bool
    detail: str | None = None
    # What the cluster itself says it runs, when the probe can tell (the Kubernetes probe).
    control_plane_version: str | None = None
    node_version: str | None = None


class ReadinessProbe(Protocol):
    """`check` never raises for an unhealthy or unreachable cluster: that is a not-ready result."""

    name: str

    async def start(self) -> None: ...

    async def check(self, cluster: str) -> ProbeResult: ...

    async def close(self) -> None: ...
