"""The summary `rollout demo` prints at the end of a run: final states, what needs attention, the log."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console

from rollout_cli.dashboard import Attention, attention_table, summary_table
from rollout_cli.demo_observer import LogLine, Observer
from rollout_cli.demo_simulation import status_document
from rollout_common.duration import format_duration
from rollout_planner.engine.views import cluster_status
from rollout_planner.simulation.runner import Simulator


@dataclass(slots=True)
class Summary:
    scenario: str
    clusters: int
    simulated: float
    wall: float
    batches: int
    rollouts: dict[str, str]
    doc: dict[str, Any]
    attention: list[Attention]
    log: list[LogLine]

    @classmethod
    def of(cls, sim: Simulator, observer: Observer, *, wall: float) -> Summary:
        return cls(
            scenario=sim.scenario.name,
            clusters=len(sim.state.clusters),
            simulated=sim.state.now - sim.origin,
            wall=wall,
            batches=len(sim.report.batches),
            rollouts={r.id: r.state.value for r in sim.state.rollouts.values()},
            doc=status_document(sim),
            attention=list(_attention(sim, observer)),
            log=observer.lines,
        )

    def show(self, console: Console) -> None:
        console.print()
        console.print(summary_table(self.doc))
        console.print(attention_table(self.attention))
        rollouts = ", ".join(f"{rid} {state}" for rid, state in self.rollouts.items()) or "no rollout started"
        console.print(
            f"{self.scenario}: {self.clusters} clusters, {self.batches} batches, "
            f"{format_duration(self.simulated)} simulated in {self.wall:.1f} s; rollout: {rollouts}",
            markup=False,
            highlight=False,
        )

    def as_json(self) -> dict[str, Any]:
        stages = {
            stage["name"]: {
                name: {key: track[key] for key in ("state", "version", "qualified", "counts")}
                for name, track in stage["tracks"].items()
            }
            for stage in self.doc["stages"]
        }
        return {
            "scenario": self.scenario,
            "clusters": self.clusters,
            "simulatedSeconds": self.simulated,
            "batches": self.batches,
            "rollouts": self.rollouts,
            "stages": stages,
            "attention": [asdict(row) for row in self.attention],
            "log": [{"t": line.t, "text": line.text} for line in self.log],
        }


def _attention(sim: Simulator, observer: Observer) -> Iterator[Attention]:
    for failure in observer.failures:
        yield Attention(
            cluster=str(failure["cluster"]),
            kind="upgrade failed",
            status=_status_now(sim, str(failure["cluster"])),
            reason=f"{failure['track']} upgrade to {failure['version']} at "
            f"T+{format_duration(float(failure['t']))}: {failure['error']}",
        )
    for outage in observer.outages:
        held = "; ".join(outage.held.values()) or "it held no gate"
        yield Attention(
            cluster=outage.cluster,
            kind="offline",
            status=_status_now(sim, outage.cluster),
            reason=f"not ready from T+{format_duration(outage.start)} to "
            f"T+{format_duration(outage.until)} (simulation.notReady); while out: {held}",
        )


def _status_now(sim: Simulator, name: str) -> str:
    record = sim.state.clusters.get(name)
    if record is None:
        return "UNKNOWN"
    status, _ = cluster_status(sim.state, record)
    return status.value
