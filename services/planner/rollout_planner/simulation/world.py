"""The simulated fleet: upgrades that take time, fail when scripted, and health that follows FORMAT."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from rollout_common.events import Readiness, UpgradeResult
from rollout_common.status import Track
from rollout_planner.simulation.scenario import Simulation


@dataclass(slots=True)
class SimCluster:
    running: dict[Track, tuple[str, str, float]] = field(default_factory=dict)  # track -> (version, cmd, end)
    failed: set[Track] = field(default_factory=set)  # tracks whose last attempt failed
    reported_ready: bool = True
    last_success: float | None = None


@dataclass(slots=True)
class Finish:
    cluster: str
    track: Track
    version: str
    command_id: str
    failed: bool


class World:
    """Owns every simulated fact; the runner asks it what happens and when."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.clusters: dict[str, SimCluster] = defaultdict(SimCluster)
        self.windows: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for window in sim.not_ready:
            if window.until > window.start:
                self.windows[window.cluster].append((window.start, window.until))
        # FORMAT: each `failures` entry fails one attempt; a retried upgrade runs again (OPS-4)
        self.failing: dict[tuple[str, Track], int] = defaultdict(int)
        for failure in sim.failures:
            self.failing[(failure.cluster, failure.track)] += 1
        self.events: list[dict[str, object]] = []

    def duration(self, track: Track) -> float:
        return (
            self.sim.upgrade_duration.control_plane if track is Track.CONTROL_PLANE else self.sim.upgrade_duration.nodes
        )

    def start(self, *, t: float, cluster: str, track: Track, version: str, command_id: str) -> float:
        """Begin an upgrade; returns when it ends."""
        end = t + self.duration(track)
        self.clusters[cluster].running[track] = (version, command_id, end)
        self.events.append({"t": t, "cluster": cluster, "track": track.value, "event": "started", "version": version})
        return end

    def finish(self, *, t: float, item: Finish) -> UpgradeResult:
        state = self.clusters[item.cluster]
        state.running.pop(item.track, None)
        if item.failed:
            state.failed.add(item.track)
        else:
            state.failed.discard(item.track)  # a retried upgrade that succeeds (OPS-4)
            state.last_success = t
        outcome = "failed" if item.failed else "succeeded"
        self.events.append(
            {"t": t, "cluster": item.cluster, "track": item.track.value, "event": outcome, "version": item.version}
        )
        return UpgradeResult(
            command_id=item.command_id,
            cluster=item.cluster,
            track=item.track,
            version=item.version,
            outcome=outcome,
            error="scripted failure" if item.failed else None,
        )

    def should_fail(self, cluster: str, track: Track) -> bool:
        """Whether this attempt fails; each scripted failure is used up by one attempt."""
        key = (cluster, track)
        if self.failing.get(key, 0) <= 0:
            return False
        self.failing[key] -= 1
        return True

    def healthy(self, name: str, t: float) -> tuple[bool, float | None]:
        """FORMAT's health model: whether the cluster is ready at t, and when to look again if not."""
        state = self.clusters[name]
        for start, until in self.windows.get(name, ()):
            if start <= t < until:
                return False, until
        if state.running or state.failed:
            return False, None
        if state.last_success is not None and t < state.last_success + self.sim.ready_after:
            return False, state.last_success + self.sim.ready_after
        return True, None

    def observe(self, name: str, t: float) -> tuple[Readiness | None, float | None]:
        """Report a health change at t (None when nothing changed), plus when to look again."""
        ready, again = self.healthy(name, t)
        state = self.clusters[name]
        if ready == state.reported_ready:
            return None, again
        state.reported_ready = ready
        self.events.append({"t": t, "cluster": name, "track": None, "event": "ready" if ready else "notReady"})
        return Readiness(cluster=name, ready=ready), again

    def window_edges(self) -> list[tuple[float, str]]:
        return [(edge, name) for name, spans in self.windows.items() for span in spans for edge in span]
