"""The planner's Prometheus metrics, in a registry of its own so several planners can share a process.

The planner loop feeds them with three calls besides the counters it increments itself:
`observe_commands` after each decision, `observe_status` with each status document it writes, and
`observe_lag` after each poll. Gauges built from the status document are set to 0 for label sets
that disappeared, so a dashboard never shows a stale count.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from rollout_common.commands import Command, StageAdvance

# Decisions take microseconds on a small fleet and up to seconds on a million clusters.
_DECISION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class PlannerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # registered in this order, the order of the exposition
        self._add_record_counters()
        self._add_decision_metrics()
        self._add_fleet_gauges()
        self._add_input_metrics()
        self._shown: dict[str, set[tuple[str, ...]]] = {}

    def _counter(self, name: str, doc: str, *labels: str) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def _gauge(self, name: str, doc: str, *labels: str) -> Gauge:
        return Gauge(name, doc, labels, registry=self.registry)

    def _add_record_counters(self) -> None:
        """What became of the records read and the batches handed out."""
        self.batches_emitted = self._counter(
            "rollout_planner_batches_emitted", "stage-advance batches handed to executors"
        )
        self.stage_batches = self._counter(
            "rollout_planner_stage_batches",
            "stage-advance batches handed to executors, per stage and track",
            "stage",
            "track",
        )
        self.events_applied = self._counter("rollout_planner_events_applied", "events applied to the engine", "kind")
        self.duplicates_skipped = self._counter(
            "rollout_planner_duplicates_skipped", "records delivered again that the snapshot already contained"
        )
        self.dead_letters = self._counter("rollout_planner_dead_letters", "records sent to the dead-letter topic")
        self.quarantined = self._counter(
            "rollout_planner_quarantined_events",
            "events set aside because the engine raised on them (BUS-9), per event kind",
            "kind",
        )
        self.lease_lost = self._counter(
            "rollout_planner_lease_lost", "times this planner lost its lease and went back to standby (BUS-8)"
        )

    def _add_decision_metrics(self) -> None:
        """How long the engine takes, and how far the persisted batches got."""
        self.decision_seconds = Histogram(
            "rollout_planner_decision_seconds",
            "time spent in one decide call",
            buckets=_DECISION_BUCKETS,
            registry=self.registry,
        )
        self.last_batch = self._gauge("rollout_planner_last_batch", "number of the last persisted batch")

    def _add_fleet_gauges(self) -> None:
        """The fleet as the last status document describes it (`observe_status`)."""
        self.rollouts = self._gauge("rollout_planner_rollouts", "rollouts per state (STAT-4)", "state")
        self.clusters = self._gauge(
            "rollout_planner_clusters",
            "clusters per stage, track and status (STAT-1), from the last status document",
            "stage",
            "track",
            "status",
        )
        self.gate_waits = self._gauge(
            "rollout_planner_waits", "current wait reasons per rule (STAT-5), summed over stages and tracks", "rule"
        )
        self.next_wake_up = self._gauge(
            "rollout_planner_next_wake_up_timestamp_seconds", "when the planner next acts on a timer (0: no timer)"
        )

    def _add_input_metrics(self) -> None:
        """What the planner has yet to read, and the events that name clusters it does not know."""
        self.consumer_lag = self._gauge(
            "rollout_planner_consumer_lag",
            "records not yet polled per input partition (highwater - position)",
            "topic",
            "partition",
        )
        self.unknown_cluster_events = self._counter(
            "rollout_planner_unknown_cluster_events",
            "readiness events and upgrade results naming a cluster the inventory does not have",
        )
        self.unknown_clusters = self._gauge(
            "rollout_planner_unknown_clusters",
            "distinct unknown cluster names the planner keeps track of (named in the last one or two notice periods)",
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def observe_commands(self, commands: Iterable[Command]) -> None:
        """Count the batches of one decision per stage and track."""
        for command in commands:
            if isinstance(command, StageAdvance):
                self.stage_batches.labels(stage=command.stage, track=command.track.value).inc()

    def observe_status(self, document: Mapping[str, Any] | bytes) -> None:
        """Set the gauges that describe the whole fleet from one status document (as written, or parsed)."""
        doc: Mapping[str, Any] = json.loads(document) if isinstance(document, bytes) else document
        rollouts: dict[tuple[str, ...], float] = {}
        for rollout in doc.get("rollouts", []):
            key = (str(rollout["state"]),)
            rollouts[key] = rollouts.get(key, 0) + 1
        clusters: dict[tuple[str, ...], float] = {}
        waits: dict[tuple[str, ...], float] = {}
        for stage in doc.get("stages", []):
            for track, view in stage["tracks"].items():
                for status, count in view["counts"].items():
                    clusters[(stage["name"], track, status)] = count
                for wait in view["waits"]:
                    key = (str(wait["rule"]),)
                    waits[key] = waits.get(key, 0) + 1
        self._set("rollouts", self.rollouts, rollouts)
        self._set("clusters", self.clusters, clusters)
        self._set("waits", self.gate_waits, waits)
        wake = doc.get("nextWakeUp")
        self.next_wake_up.set(float(wake["at"]) if wake else 0.0)

    async def observe_lag(self, consumer: object) -> None:
        """Lag per partition, when the consumer can tell it (`async lag() -> {(topic, partition): n}`).

        The `Consumer` port has no such method yet; on a consumer without one this does nothing.
        """
        lag = getattr(consumer, "lag", None)
        if lag is None:
            return
        result = lag()
        values: Mapping[tuple[str, int], int] = await result if inspect.isawaitable(result) else result
        self._set("lag", self.consumer_lag, {(topic, str(part)): n for (topic, part), n in values.items()})

    def _set(self, name: str, gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
        """Set every label set in `values`, and 0 for those set last time but gone now."""
        for labels in self._shown.get(name, set()) - set(values):
            gauge.labels(*labels).set(0)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._shown[name] = set(self._shown.get(name, set())) | set(values)
