"""What the dashboard shows: the status document and the clusters needing attention, as one snapshot.

The planner (one event loop) and the demo (a simulation thread beside the web server's thread)
publish snapshots; request handlers only read the latest one, so a page never sees half a batch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# the kinds of trouble a person filters the attention list by
ATTENTION_KINDS = ("FAILED", "OFFLINE", "INELIGIBLE", "PAUSED")
PAGE_MAX = 200


@dataclass(frozen=True, slots=True)
class ClusterRow:
    """One cluster needing attention: why (kind and status), where (stage, partition), its labels."""

    name: str
    kind: str
    status: str
    detail: str
    stage: str | None
    partition: str | None
    labels: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "detail": self.detail,
            "stage": self.stage,
            "partition": self.partition,
            "labels": dict(self.labels),
        }


@dataclass(frozen=True, slots=True)
class Snapshot:
    doc: Mapping[str, Any]
    rows: Sequence[ClusterRow]
    version: str

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


EMPTY = Snapshot(
    doc={"now": 0.0, "stages": [], "rollouts": [], "nextWakeUp": None, "attention": None}, rows=(), version="0"
)


class Feed:
    """The latest snapshot; `publish` may run on another thread than the readers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._snapshot = EMPTY

    def publish(self, doc: Mapping[str, Any], rows: Sequence[ClusterRow]) -> Snapshot:
        with self._lock:
            self._count += 1
            self._snapshot = Snapshot(doc=doc, rows=tuple(rows), version=str(self._count))
            return self._snapshot

    def current(self) -> Snapshot:
        with self._lock:
            return self._snapshot


class ClusterQuery(BaseModel):
    """A filter over the attention list; every field optional, matched case-insensitively."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="", max_length=200, description="part of the cluster name")
    label: str = Field(default="", max_length=200, description="`key` or `key=value`")
    stage: str = Field(default="", max_length=200, description="exact stage name")
    status: str = Field(default="", max_length=40, description="a kind (FAILED, OFFLINE, ...) or a STAT-1 status")
    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=50, ge=1, le=PAGE_MAX)

    def matches(self, row: ClusterRow) -> bool:
        if self.name and self.name.lower() not in row.name.lower():
            return False
        if self.stage and (row.stage or "").lower() != self.stage.lower():
            return False
        if self.status and self.status.upper() not in (row.kind, row.status):
            return False
        return not self.label or _label_matches(self.label, row.labels)


def _label_matches(wanted: str, labels: Mapping[str, str]) -> bool:
    key, has_value, value = wanted.partition("=")
    key = key.strip()
    if key not in labels:
        return False
    return not has_value or labels[key] == value.strip()


def page_of(rows: Sequence[ClusterRow], query: ClusterQuery) -> dict[str, Any]:
    """One page of the matching rows and how many match in all: the page's cost is the filter's pass."""
    matched = [row for row in rows if query.matches(row)] if _filtering(query) else rows
    items = matched[query.offset : query.offset + query.limit]
    return {
        "total": len(rows),
        "matched": len(matched),
        "offset": query.offset,
        "limit": query.limit,
        "clusters": [row.as_json() for row in items],
    }


def _filtering(query: ClusterQuery) -> bool:
    return bool(query.name or query.label or query.stage or query.status)


__all__ = ["ATTENTION_KINDS", "EMPTY", "PAGE_MAX", "ClusterQuery", "ClusterRow", "Feed", "Snapshot", "page_of"]
