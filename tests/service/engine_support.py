"""What the engine this branch runs with already does, asked of the pure engine itself.

Retry (OPS-4) and live sequence changes (SEQ-7) are answered by the engine; the end-to-end tests of
the CLI around them are expected to fail until the engine applies them, and must pass from then on.
"""

from __future__ import annotations

from planner_harness import NEW, START, fleet, sequence

from rollout_common.commands import CommandAck, RolloutTransition
from rollout_common.events import OperatorCommand, ReleaseTarget, SequenceChange
from rollout_common.status import RolloutState
from rollout_planner.engine import decide, new_state


def applies_sequence_changes() -> bool:
    state = new_state(sequence(), fleet())
    _, out = decide(state, SequenceChange(command_id="probe", sequence=sequence(soak="2d")), START)
    return any(isinstance(c, CommandAck) and c.accepted for c in out)


def retries() -> bool:
    state = new_state(sequence(), fleet())
    state, _ = decide(state, ReleaseTarget(event_id="r", channel="regular", targets={"1.30": NEW}), START)
    _, out = decide(state, OperatorCommand(command_id="probe", action="retry", all_rollouts=True), START)
    cancelled = any(isinstance(c, RolloutTransition) and c.state is RolloutState.CANCELLED for c in out)
    return not cancelled and any(isinstance(c, CommandAck) and c.accepted for c in out)
