"""The pure rollout engine: `decide(state, event, now) -> (state, commands)`.

No I/O, no clock, no randomness: time comes in as `now` (epoch seconds) and timers go out as
`WakeAt` commands. The state is a mutable aggregate owned by the caller between calls; `decide`
updates it in place and returns it, because copying a million-cluster fleet per event would cost
more than the decision itself.
"""

from rollout_planner.engine.decide import decide, new_state
from rollout_planner.engine.model import EngineState

__all__ = ["EngineState", "decide", "new_state"]
