"""A health reporter's raw probe result: sent on change and periodically as a heartbeat."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from rollout_common.epoch import EpochSeconds
from rollout_common.version import ReportedVersionText


class Heartbeat(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    TIME_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (("observed_at", "observedAt"),)

    kind: Literal["heartbeat"] = "heartbeat"
    cluster: str
    ready: StrictBool
    observed_at: EpochSeconds = Field(alias="observedAt", description="epoch seconds at the reporter")
    reporter: str = "unknown"
    detail: str | None = None
    # The versions the cluster itself reports running (API server, oldest kubelet), when the
    # probe can read them: an upgrade that "succeeded" on another version shows here.
    # Kubernetes' spelling (`v1.31.0+k3s1`), bounded as every version is where it enters.
    control_plane_version: ReportedVersionText | None = Field(default=None, alias="controlPlaneVersion")
    node_version: ReportedVersionText | None = Field(default=None, alias="nodeVersion")
