"""The bridge's settings (`ROLLOUT_*` environment variables, like every service's)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field

from rollout_common.connection_settings import ServiceSettings


def _identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class BridgeSettings(ServiceSettings):
    kubeconfig: Path | None = Field(
        default=None, description="the management cluster's kubeconfig (default: $KUBECONFIG or the pod's account)"
    )
    kube_context: str | None = None
    namespace: str = Field(default="rollout", description="where the bridge watches our resources and makes rollouts")
    lease_name: str = "rollout-kube-bridge"
    identity: str = Field(default_factory=_identity, description="this replica's name in the Lease")
    lease_duration_s: int = Field(default=15, ge=1, description="a standby takes over this long after the last renewal")
    lease_renew_s: float = Field(default=5.0, gt=0, description="how often the leader renews the Lease")
    watch_timeout_s: int = Field(default=300, ge=1, description="the apiserver ends a watch after this; it resumes")
    retry_s: float = Field(default=2.0, gt=0, description="pause before resuming after a transient error")
    source: str = Field(default="rollout-kube-bridge", description="ce_source of the events it publishes")
