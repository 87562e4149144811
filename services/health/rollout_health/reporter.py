"""The health reporter: probes each cluster every `probe_interval_s` and publishes a Heartbeat
when its readiness changed, or when the last one is `heartbeat_interval_s` old.

A heartbeat that cannot be published (broker unreachable) is simply tried again on the next
round: it is not marked as sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rollout_adapters.shutdown import unless_stopped
from rollout_common.envelope import encode
from rollout_common.errors import TransientError
from rollout_common.heartbeat import Heartbeat
from rollout_common.ports import Bus
from rollout_common.topics.catalog import HEARTBEATS
from rollout_health.metrics import HealthMetrics
from rollout_health.probes.port import ProbeResult, ReadinessProbe

log = logging.getLogger(__name__)

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class _Sent:
    ready: bool
    at: float
    versions: tuple[str | None, str | None] = (None, None)


class Reporter:
    def __init__(
        self,
        *,
        bus: Bus,
        probe: ReadinessProbe,
        clusters: Sequence[str],
        reporter_id: str,
        topic_prefix: str = "",
        probe_interval_s: float = 5.0,
        heartbeat_interval_s: float = 30.0,
        clock: Clock = time.time,
        metrics: HealthMetrics | None = None,
    ) -> None:
        self._bus = bus
        self.metrics = metrics or HealthMetrics()
        # Ready once a round has reached Kafka: every heartbeat due was published.
        self.ready = False
        self._probe = probe
        self._clusters = tuple(dict.fromkeys(clusters))
        self._reporter_id = reporter_id
        self._topic = topic_prefix + HEARTBEATS.name
        self._probe_interval_s = probe_interval_s
        self._heartbeat_interval_s = heartbeat_interval_s
        self._clock = clock
        self._sent: dict[str, _Sent] = {}
        self._round_ok = True

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            # A round publishing to an unreachable broker can take minutes: SIGTERM cuts it short.
            await unless_stopped(self.tick(), stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._probe_interval_s)

    async def tick(self) -> list[Heartbeat]:
        """Probe every cluster once; returns the heartbeats published."""
        async with asyncio.TaskGroup() as group:
            checks = {cluster: group.create_task(self._probe.check(cluster)) for cluster in self._clusters}
        self._round_ok = True
        # Side by side, as the probes: one after the other, each waiting for its acknowledgement
        # (acks=all, two brokers in sync), a round of 60 clusters took seconds on a three-broker
        # cluster and a changed readiness waited for it. With the broker gone they all wait for
        # the bus's bound once; the ones not taken are not marked sent, so the next round retries.
        async with asyncio.TaskGroup() as group:
            reports = [group.create_task(self._report(cluster, check.result())) for cluster, check in checks.items()]
        self.ready = self._round_ok
        return [heartbeat for report in reports if (heartbeat := report.result()) is not None]

    async def _report(self, cluster: str, result: ProbeResult) -> Heartbeat | None:
        now = self._clock()
        last = self._sent.get(cluster)
        versions = (result.control_plane_version, result.node_version)
        if not self._due(last, ready=result.ready, versions=versions, now=now):
            return None
        heartbeat = self._heartbeat(cluster, result, now)
        if not await self._publish(heartbeat, now):
            return None
        self.metrics.heartbeats_published.labels(ready=str(result.ready).lower()).inc()
        if last is None or last.ready != result.ready:
            _log_readiness(cluster, result)
        self._sent[cluster] = _Sent(ready=result.ready, at=now, versions=versions)
        return heartbeat

    def _due(self, last: _Sent | None, *, ready: bool, versions: tuple[str | None, str | None], now: float) -> bool:
        """A heartbeat is due when readiness or versions changed, or the last one is old enough."""
        unchanged = last is not None and last.ready == ready and last.versions == versions
        return not (unchanged and last is not None and now - last.at < self._heartbeat_interval_s)

    def _heartbeat(self, cluster: str, result: ProbeResult, now: float) -> Heartbeat:
        return Heartbeat(
            cluster=cluster,
            ready=result.ready,
            observed_at=now,
            reporter=self._reporter_id,
            detail=result.detail,
            control_plane_version=result.control_plane_version,
            node_version=result.node_version,
        )

    async def _publish(self, heartbeat: Heartbeat, now: float) -> bool:
        """False when the broker did not take it: the round is then not ok and the next one retries."""
        cluster = heartbeat.cluster
        value, headers = encode(
            heartbeat,
            event_id=f"{self._reporter_id}/{cluster}/{now:.3f}",
            source=f"rollout-health-reporter/{self._reporter_id}",
            at=now,
            subject=cluster,
        )
        try:
            await self._bus.publish(self._topic, key=HEARTBEATS.key(heartbeat).encode(), value=value, headers=headers)
        except TransientError as exc:
            log.warning("heartbeat of %s not published, next round retries: %s", cluster, exc)
            self.metrics.heartbeats_unpublished.inc()
            self._round_ok = False
            return False
        return True


def _log_readiness(cluster: str, result: ProbeResult) -> None:
    log.info(
        "%s: %s%s",
        cluster,
        "ready" if result.ready else "not ready",
        f" ({result.detail})" if result.detail else "",
    )
