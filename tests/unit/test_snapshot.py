"""BUS-6: a planner restarted from its snapshot decides exactly what an uninterrupted one decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_common.commands import Command, WaitChanged
from rollout_common.events import Event
from rollout_planner.engine import snapshot
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario, load_scenario

SHARED = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cases"
OWN = Path(__file__).resolve().parents[1] / "scenarios"
CASES = sorted(SHARED.glob("*.yaml")) + sorted(OWN.glob("*.yaml"))


class RecordingSimulator(Simulator):
    """Keeps every command it decides (WaitChanged aside: the snapshot does not keep the last
    announced waits, so a restarted planner announces them once more)."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.decided: list[str] = []

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        commands = super()._decide(events, t)
        self.decided += [c.model_dump_json() for c in commands if not isinstance(c, WaitChanged)]
        return commands


class RestartingSimulator(RecordingSimulator):
    """Reloads the engine from a snapshot before every decision, as a restarted planner would."""

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        self.state = snapshot.load(snapshot.dump(self.state))
        return super()._decide(events, t)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_bus_6_snapshot_restart_changes_no_decision(path: Path) -> None:
    scenario = load_scenario(path)
    straight = RecordingSimulator(scenario)
    restarted = RestartingSimulator(scenario)
    assert restarted.run().as_json() == straight.run().as_json()
    assert restarted.decided == straight.decided  # commands too: retries, acks, notices (BUS-6)
