"""A probe that believes the executors: a cluster is not ready while an upgrade runs on it.

It reads every partition of the upgrade-results topic from the beginning, so a restarted
reporter rebuilds the same picture. It joins no consumer group: a group's coordinator that dies
with its broker can leave a member waiting for ever, and this reader needs no member's
coordination (nothing to share, nothing to commit). `started` makes the cluster not
ready, `succeeded` makes it ready `ready_after_s` (scaled) after the result's timestamp,
`failed` keeps it not ready until the next result for that track. Scripted outages from the
settings apply on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from rollout_common.envelope import decode
from rollout_common.errors import InvalidInputError, RolloutError
from rollout_common.events import UpgradeResult
from rollout_common.ports import Bus, Consumer
from rollout_common.status import Track
from rollout_common.topics.catalog import UPGRADE_RESULTS
from rollout_health.probes.port import ProbeResult
from rollout_health.settings import SimulatedProbeSettings

log = logging.getLogger(__name__)

Clock = Callable[[], float]
_RETRY_S = 1.0


class SimulatedProbe:
    name = "simulated"

    def __init__(
        self, settings: SimulatedProbeSettings, *, bus: Bus, topic_prefix: str = "", clock: Clock = time.time
    ) -> None:
        self._settings = settings
        self._bus = bus
        self._topic = topic_prefix + UPGRADE_RESULTS.name
        self._clock = clock
        self._origin = clock()
        self._upgrading: set[tuple[str, Track]] = set()
        self._failed: dict[tuple[str, Track], str] = {}
        self._ready_at: dict[str, float] = {}
        self._follower: asyncio.Task[None] | None = None

    async def start(self) -> None:
        consumer = self._bus.consumer([self._topic], group=None)
        self._follower = asyncio.create_task(self._follow(consumer))

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower

    def apply(self, result: UpgradeResult, *, at: float) -> None:
        """Take one upgrade result, published at `at` (epoch seconds), into account."""
        track = (result.cluster, result.track)
        self._failed.pop(track, None)
        if result.outcome == "started":
            self._upgrading.add(track)
            return
        self._upgrading.discard(track)
        if result.outcome == "failed":
            self._failed[track] = result.error or "upgrade failed"
            return
        settled = at + self._settings.ready_after_s * self._settings.time_scale
        self._ready_at[result.cluster] = max(self._ready_at.get(result.cluster, 0.0), settled)

    async def check(self, cluster: str) -> ProbeResult:
        now = self._clock()
        if self._offline(cluster, now):
            return ProbeResult(ready=False, detail="scripted offline")
        for (name, track), error in self._failed.items():
            if name == cluster:
                return ProbeResult(ready=False, detail=f"{track.value} upgrade failed: {error}")
        for name, track in self._upgrading:
            if name == cluster:
                return ProbeResult(ready=False, detail=f"{track.value} upgrading")
        if now < self._ready_at.get(cluster, 0.0):
            return ProbeResult(ready=False, detail="settling after an upgrade")
        return ProbeResult(ready=True)

    def _offline(self, cluster: str, now: float) -> bool:
        window = self._settings.offline.get(cluster)
        if window is None:
            return False
        elapsed = (now - self._origin) / (self._settings.time_scale or 1.0)
        return window.from_s <= elapsed and (window.until_s is None or elapsed < window.until_s)

    async def _follow(self, consumer: Consumer) -> None:
        try:
            while True:
                try:
                    records = await consumer.poll(timeout_s=1.0)
                except RolloutError as exc:
                    log.warning("simulated probe: reading upgrade results failed: %s", exc)
                    await asyncio.sleep(_RETRY_S)
                    continue
                for record in records:
                    try:
                        _, result = decode(record.value, record.headers, UPGRADE_RESULTS.models)
                    except InvalidInputError:
                        continue  # not ours to dead-letter: the planner reads this topic too
                    if isinstance(result, UpgradeResult):
                        self.apply(result, at=record.timestamp_ms / 1000)
        finally:
            await consumer.close()
