"""Which clusters the staleness timer has to look at on a tick, without looking at every row.

A tick used to judge every row of the table: at 150,000 clusters a worker that took 0.3 to 0.6 s of
CPU every `check_interval_s`, holding its agent back meanwhile, although almost no cluster needs
anything on a given tick. Whether a row needs the timer (a stale mark, its expiry) depends on its
newest heartbeat's time, its grace and what was last published, and grows true only as time passes.
So a row judged "nothing to do" at some time also needs nothing before the earliest time one of
its conditions could hold, as long as nothing else changes it: a newer heartbeat only moves that
time later. The schedule keeps that time per cluster and hands the timer, on each tick:

- the clusters whose time has come (a heap, entries made stale by a newer time skipped);
- the clusters changed since the last tick (`look_soon`): a new row, a readiness change, the first
  heartbeat since a rebalance (its grace goes, so its time may come earlier);
- every cluster in the tick's republish group (`republish_group`), when readiness is said again;
- every row, after `rescan` (a rebalance: the rows and the times kept in memory changed), until
  the worker holds its partitions and has recovered its table.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable


class SilenceSchedule:
    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        self._at: dict[str, float] = {}  # each cluster's current time in the heap
        self._soon: set[str] = set()
        self._groups: dict[int, set[str]] = {}
        self._rescan = True

    def __len__(self) -> int:
        """Clusters with a time to be looked at."""
        return len(self._at)

    def rescan(self) -> None:
        """Look at every row on the next tick (and on each tick until `due` is told it is settled)."""
        self._rescan = True

    def look_soon(self, cluster: str) -> None:
        """Look at `cluster` on the next tick: something changed it."""
        self._soon.add(cluster)

    def later(self, cluster: str, *, at: float, group: int | None) -> None:
        """Nothing needed for `cluster` before `at` (inf: only on its republish turn or a change);
        `group` is its republish group, if it is said again."""
        if not math.isfinite(at):
            self._at.pop(cluster, None)
        elif (current := self._at.get(cluster)) is None or at < current:
            # an earlier time already in the heap stands: that look finds nothing and sets this one
            self._at[cluster] = at
            heapq.heappush(self._heap, (at, cluster))
        if group is not None:
            self._groups.setdefault(group, set()).add(cluster)

    def forget(self, cluster: str) -> None:
        """`cluster` has no row any more."""
        self._at.pop(cluster, None)
        self._soon.discard(cluster)
        for members in self._groups.values():
            members.discard(cluster)

    def due(
        self, *, now: float, group: int | None, everything: Callable[[], Iterable[str]], settled: bool
    ) -> list[str]:
        """The clusters to look at now, in name order; each one looked at must be given its next time
        (`later`), or `forget`, or `look_soon` again."""
        if self._rescan:
            # A full look hands every row its time afresh: what is kept is rebuilt from it.
            self._rescan = not settled
            self._heap.clear()
            self._at.clear()
            self._soon.clear()
            self._groups.clear()
            return sorted(everything())
        looked, self._soon = self._soon, set()
        heap, at = self._heap, self._at
        while heap and heap[0][0] <= now:
            when, cluster = heapq.heappop(heap)
            if at.get(cluster) == when:
                del at[cluster]
                looked.add(cluster)
        if group is not None:
            looked |= self._groups.get(group, set())
        return sorted(looked)


__all__ = ["SilenceSchedule"]
