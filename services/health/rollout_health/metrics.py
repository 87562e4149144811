"""Prometheus metrics of the health reporter and monitor, in a registry of their own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics


class HealthMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._add_reporter_metrics()
        self._add_monitor_metrics()
        self._add_check_metrics()
        self.dead_letters = DeadLetterMetrics(self.registry)

    def _add_reporter_metrics(self) -> None:
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

    def _add_monitor_metrics(self) -> None:
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
        self.judged_behind = Gauge(
            "rollout_health_judged_behind_seconds",
            "How far behind now the worker judged silences at its last staleness check: its backlog on the "
            "heartbeat partition furthest behind, at most staleness_limit_s (0: read to the end)",
            registry=self.registry,
        )
        self.rows_looked_at = Counter(
            "rollout_health_rows_looked_at",
            "Rows the staleness timer judged: those whose silence could be due, changed since its last tick, "
            "in their republish turn, or all of them after a rebalance",
            registry=self.registry,
        )
        self.rows_expired = Counter(
            "rollout_health_rows_expired",
            "Rows the monitor dropped after row_expiry_s of silence (unknown, mistyped or decommissioned names)",
            registry=self.registry,
        )

    def _add_check_metrics(self) -> None:
        """The check runner's (CHK-2)."""
        self.check_evaluations = Counter(
            "rollout_health_check_evaluations",
            "Metric check evaluations (CHK-2), by outcome: passed, failed or inconclusive",
            ["outcome"],
            registry=self.registry,
        )
        self.check_evaluation_seconds = Histogram(
            "rollout_health_check_evaluation_seconds",
            "How long one metric check evaluation took: the Prometheus query and judging its answer",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.check_results_unpublished = Counter(
            "rollout_health_check_results_unpublished",
            "Check results that could not be published (Kafka unreachable); the next evaluation follows",
            registry=self.registry,
        )
