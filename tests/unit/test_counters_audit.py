"""The cost of one event does not grow with the fleet because counters are kept incrementally;
this proves, after every decision of every scenario, that they equal a count from scratch."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_common.commands import Command
from rollout_common.events import Event
from rollout_planner.engine.audit import audit
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import load_scenario

SHARED = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "cases"
OWN = Path(__file__).resolve().parents[1] / "scenarios"
CASES = sorted(SHARED.glob("*.yaml")) + sorted(OWN.glob("*.yaml"))


class AuditingSimulator(Simulator):
    def _decide(self, events: list[Event], t: float) -> list[Command]:
        commands = super()._decide(events, t)
        problems = audit(self.state)
        assert problems == [], f"t={t}: {problems[:5]}"
        return commands


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_incremental_counters_equal_a_recount_after_every_decision(path: Path) -> None:
    AuditingSimulator(load_scenario(path)).run()
