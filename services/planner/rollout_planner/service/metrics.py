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
        self.batches_emitted = Counter(
            "rollout_planner_batches_emitted", "stage-advance batches handed to executors", registry=self.registry
        )
        self.stage_batches = Counter(
            "rollout_planner_stage_batches",
            "stage-advance batches handed to executors, per stage and track",
            ["stage", "track"],
            registry=self.registry,
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
        self.quarantined = Counter(
            "rollout_planner_quarantined_events",
            "events set aside because the engine raised on them (BUS-9), per event kind",
            ["kind"],
            registry=self.registry,
        )
        self.lease_lost = Counter(
            "rollout_planner_lease_lost",
            "times this planner lost its lease and went back to standby (BUS-8)",
            registry=self.registry,
        )
        self.decision_seconds = Histogram(
            "rollout_planner_decision_seconds",
            "time spent in one decide call",
            buckets=_DECISION_BUCKETS,
            registry=self.registry,
        )
        self.last_batch = Gauge(
            "rollout_planner_last_batch", "number of the last persisted batch", registry=self.registry
        )
        self.rollouts = Gauge(
            "rollout_planner_rollouts", "rollouts per state (STAT-4)", ["state"], registry=self.registry
        )
        self.clusters = Gauge(
            "rollout_planner_clusters",
            "clusters per stage, track and status (STAT-1), from the last status document",
            ["stage", "track", "status"],
            registry=self.registry,
        )
        self.gate_waits = Gauge(
            "rollout_planner_waits",
            "current wait reasons per rule (STAT-5), summed over stages and tracks",
            ["rule"],
            registry=self.registry,
        )
        self.next_wake_up = Gauge(
            "rollout_planner_next_wake_up_timestamp_seconds",
            "when the planner next acts on a timer (0: no timer)",
            registry=self.registry,
        )
        self.consumer_lag = Gauge(
            "rollout_planner_consumer_lag",
            "records not yet polled per input partition (highwater - position)",
            ["topic", "partition"],
            registry=self.registry,
        )
        self.unknown_cluster_events = Counter(
            "rollout_planner_unknown_cluster_events",
            "readiness events and upgrade results naming a cluster the inventory does not have",
            registry=self.registry,
        )
        self.unknown_clusters = Gauge(
            "rollout_planner_unknown_clusters",
            "distinct unknown cluster names the planner keeps track of (named in the last one or two notice periods)",
            registry=self.registry,
        )
        self._shown: dict[str, set[tuple[str, ...]]] = {}

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
