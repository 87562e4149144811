"""A health reporter's raw probe result: sent on change and periodically as a heartbeat."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class Heartbeat(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    kind: Literal["heartbeat"] = "heartbeat"
    cluster: str
    ready: StrictBool
    observed_at: float = Field(alias="observedAt", description="epoch seconds at the reporter")
    reporter: str = "unknown"
    detail: str | None = None
    # The versions the cluster itself reports running (API server, oldest kubelet), when the
    # probe can read them: an upgrade that "succeeded" on another version shows here.
    control_plane_version: str | None = Field(default=None, alias="controlPlaneVersion")
    node_version: str | None = Field(default=None, alias="nodeVersion")
