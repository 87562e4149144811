"""The demo's simulator driven against the wall clock, and the status document it draws."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rollout_planner.service.status_document import status_document as planner_status
from rollout_planner.simulation.runner import Simulator

# A quiet stretch (a soak, the 30-day forced-soak deadline) never takes longer than this on the wall
# clock; the simulated clock visibly races through it instead of freezing the screen.
MAX_GAP_WALL = 1.5
FRAME_SECONDS = 0.1


class Pacer:
    """Turns a jump of the simulated clock into wall time, calling `on_frame` with the clock meanwhile."""

    def __init__(self, speed: float, *, on_frame: Callable[[float], None] | None = None) -> None:
        self.speed = speed
        self.on_frame = on_frame

    def advance(self, start: float, end: float) -> None:
        if self.speed <= 0 or end <= start:
            return
        wall = min((end - start) / self.speed, MAX_GAP_WALL)
        began = time.monotonic()
        while (elapsed := time.monotonic() - began) < wall:
            if self.on_frame is not None:
                self.on_frame(start + (end - start) * elapsed / wall)
            time.sleep(min(FRAME_SECONDS, wall - elapsed))


def drive(sim: Simulator, pacer: Pacer, *, on_step: Callable[[float], object]) -> None:
    """Run the simulation to its end, instant by instant, waiting on the pacer before each one."""
    sim.start()
    previous = 0.0
    while (t := sim.next_time()) is not None:
        pacer.advance(previous, t)
        sim.step()
        previous = t
        on_step(t)


def status_document(sim: Simulator) -> dict[str, Any]:
    """The planner service's own status document, so the demo draws what `rollout status` would show."""
    return planner_status(sim.state, batch=sim.report.decisions)
