"""The planner's Prometheus metrics, in a registry of its own so several planners can share a process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class PlannerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.batches_emitted = Counter(
            "rollout_planner_batches_emitted", "stage-advance batches handed to executors", registry=self.registry
        )
        self.events_applied = Counter(
            "rollout_planner_events_applied", "events applied to the engine", ["kind"], registry=self.registry
        )
        self.duplicates_skipped = Counter(
            "rollout_planner_duplicates_skipped",
            "records delivered again that the snapshot already contained",
            registry=self.registry,
        )
        self.dead_letters = Counter(
            "rollout_planner_dead_letters", "records sent to the dead-letter topic", registry=self.registry
        )
        self.decision_seconds = Histogram(
            "rollout_planner_decision_seconds", "time spent in one decide call", registry=self.registry
        )
        self.last_batch = Gauge(
            "rollout_planner_last_batch", "number of the last persisted batch", registry=self.registry
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
