"""The dead-letter counter and log line every service emits, the same way.

`rollout_dead_letters_total{topic, reason_kind}`: `topic` is where the record was read,
`reason_kind` one of `rollout_common.dead_letters.REASON_KINDS`; each dead letter also logs one
structured warning (topic, partition, offset, reason, reason kind, source).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter

from rollout_common.dead_letters import reason_kind
from rollout_common.ports import Record

_log = logging.getLogger("rollout.dead_letters")


class DeadLetterMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.counter = Counter(
            "rollout_dead_letters",
            "Records sent to the dead-letter topic, by the topic they were read from and kind of reason",
            ["topic", "reason_kind"],
            registry=registry,
        )

    def record(self, record: Record, *, reason: str, source: str) -> str:
        """Count and log one dead letter; returns its reason kind."""
        kind = reason_kind(reason)
        self.counter.labels(topic=record.topic, reason_kind=kind).inc()
        _log.warning(
            "dead-lettered %s/%d@%d: %s",
            record.topic,
            record.partition,
            record.offset,
            reason,
            extra={
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "dlq_reason": reason,
                "reason_kind": kind,
                "dlq_source": source,
            },
        )
        return kind


__all__ = ["DeadLetterMetrics"]
