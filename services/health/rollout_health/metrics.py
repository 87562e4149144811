"""Prometheus metrics of the health reporter and monitor, in a registry of their own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics


class HealthMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.heartbeats_published = Counter(
            "rollout_health_heartbeats_published",
            "Heartbeats the reporter published, by readiness",
            ["ready"],
            registry=self.registry,
        )
        self.heartbeats_unpublished = Counter(
            "rollout_health_heartbeats_unpublished",
            "Heartbeats that could not be published (retried next round)",
            registry=self.registry,
        )
        self.readiness_changes = Counter(
            "rollout_health_readiness_changes",
            "Readiness changes the monitor published, by new readiness",
            ["ready"],
            registry=self.registry,
        )
        self.stale_marks = Counter(
            "rollout_health_stale_marks",
            "Clusters the monitor marked not ready because their heartbeats stopped",
            registry=self.registry,
        )
        self.rows_expired = Counter(
            "rollout_health_rows_expired",
            "Rows the monitor dropped after row_expiry_s of silence (unknown, mistyped or decommissioned names)",
            registry=self.registry,
        )
        self.dead_letters = DeadLetterMetrics(self.registry)
