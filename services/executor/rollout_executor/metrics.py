"""The executor's Prometheus metrics, in a registry of their own (one per service instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from rollout_adapters.dead_letter_metrics import DeadLetterMetrics

# Upgrades last from seconds (simulated, scaled) to an hour (node pools).
_DURATION_BUCKETS = (0.1, 1, 5, 30, 60, 300, 600, 1200, 1800, 3600, 7200)


class ExecutorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._add_upgrade_metrics()
        self._add_batch_metrics()

    def _add_upgrade_metrics(self) -> None:
        """What the upgrades themselves did: how they ended, how long they took, what stopped them."""
        self.upgrades = Counter(
            "rollout_executor_upgrades",
            "Upgrades this executor ran, by track and outcome",
            ["track", "outcome"],
            registry=self.registry,
        )
        self.replayed = Counter(
            "rollout_executor_results_replayed",
            "Results re-published from the store instead of upgrading again",
            registry=self.registry,
        )
        self.duration = Histogram(
            "rollout_executor_upgrade_duration_seconds",
            "Time an upgrade took in the driver, by track",
            ["track"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.leases_lost = Counter(
            "rollout_executor_leases_lost",
            "Upgrades stopped (or results refused) because the target's lease was lost",
            registry=self.registry,
        )

    def _add_batch_metrics(self) -> None:
        """What became of the command records read: committed in batches or dead-lettered."""
        self.batches = Counter(
            "rollout_executor_batches", "Batches of commands handled and committed", registry=self.registry
        )
        self.dead_letters = Counter(
            "rollout_executor_dead_letters", "Records sent to the dead-letter topic", registry=self.registry
        )
        self.dead_letters_by_kind = DeadLetterMetrics(self.registry)
