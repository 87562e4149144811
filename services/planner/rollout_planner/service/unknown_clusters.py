"""Notices about clusters the planner does not know: each name said at most once per period.

The engine answers every readiness event and upgrade result naming a cluster it does not know with
an `UNKNOWN_CLUSTER` notice. A health monitor republishes readiness for every cluster it has a row
for, every republish interval, so a few hundred made-up names became thousands of notices on the
progress topic, without end. The planner counts every such event (`rollout_planner_unknown_cluster_events`,
and the names of the current period in `rollout_planner_unknown_clusters`) and passes on at most one
notice per name per `interval_s`; the notice says how many events it stands for. Beyond `max_names`
names in one period, the others are summed up in one notice per period. Time is the engine's `now`.

Kept in memory only: a restarted planner says each name once more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rollout_common.commands import Command, Notice

UNKNOWN_CLUSTER = "UNKNOWN_CLUSTER"


@dataclass(slots=True)
class _Said:
    at: float  # when its last notice went out
    held: int = 0  # notices held back since


class UnknownClusterNotices:
    def __init__(self, *, interval_s: float, max_names: int = 10_000) -> None:
        self._interval_s = interval_s
        self._max_names = max_names
        self._said: dict[str, _Said] = {}
        self._overflow = 0  # notices about names beyond max_names since the last summary
        self._summary_at: float | None = None
        self._pruned_at: float | None = None
        self.events = 0  # every UNKNOWN_CLUSTER notice the engine gave, said or not

    @property
    def names(self) -> int:
        """Unknown names reported within the current period."""
        return len(self._said)

    def filter(self, commands: Sequence[Command], *, now: float) -> list[Command]:
        """The commands, with the notices about unknown clusters thinned out (the rest as they are)."""
        if self._pruned_at is None or now - self._pruned_at >= self._interval_s:
            self._pruned_at = now  # once per period: the names whose period is over are forgotten
            self._forget_expired(now=now)
        out: list[Command] = []
        for command in commands:
            if isinstance(command, Notice) and command.code == UNKNOWN_CLUSTER and command.cluster is not None:
                self.events += 1
                said = self._say(command, now=now)
                if said is not None:
                    out.append(said)
            else:
                out.append(command)
        summary = self._summary(now=now)
        if summary is not None:
            out.append(summary)
        return out

    def _say(self, notice: Notice, *, now: float) -> Notice | None:
        name = notice.cluster
        assert name is not None
        said = self._said.get(name)
        if said is not None and now - said.at < self._interval_s:
            said.held += 1
            return None
        if said is None and len(self._said) >= self._max_names and not self._forget_expired(now=now):
            self._overflow += 1
            return None
        held = 0 if said is None else said.held
        self._said[name] = _Said(at=now)
        more = f"; {held} more since its last notice" if held else ""
        every = f"said at most once per {self._interval_s:g} s per cluster{more}"
        return notice.model_copy(update={"message": f"{notice.message} ({every})"})

    def _forget_expired(self, *, now: float) -> bool:
        """Drop the names whose period is over, but keep for one more period those with events held
        back (their next notice says how many); True when there is room for another name."""
        interval = self._interval_s
        expired = [
            name
            for name, said in self._said.items()
            if now - said.at >= 2 * interval or (now - said.at >= interval and not said.held)
        ]
        for name in expired:
            del self._said[name]
        return len(self._said) < self._max_names

    def _summary(self, *, now: float) -> Notice | None:
        if not self._overflow:
            return None
        if self._summary_at is not None and now - self._summary_at < self._interval_s:
            return None
        count, self._overflow, self._summary_at = self._overflow, 0, now
        return Notice(
            code=UNKNOWN_CLUSTER,
            message=f"{count} readiness events or results about unknown clusters beyond the {self._max_names} "
            f"named in the last {self._interval_s:g} s (said at most once per {self._interval_s:g} s)",
        )


__all__ = ["UNKNOWN_CLUSTER", "UnknownClusterNotices"]
