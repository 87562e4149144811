"""What the engine this branch runs with already does, asked of the pure engine itself.

Retry (OPS-4) and live sequence changes (SEQ-7) are answered by the engine; the end-to-end tests of
the CLI around them are expected to fail until the engine applies them, and must pass from then on.
"""

from __future__ import annotations

from planner_harness import NEW, START, fleet, sequence

from rollout_common.commands import CommandAck, RolloutTransition, StageAdvance
from rollout_common.events import OperatorCommand, ReleaseTarget, SequenceChange, UpgradeResult
from rollout_common.status import RolloutState
from rollout_planner.engine import decide, new_state


def applies_sequence_changes() -> bool:
    state = new_state(sequence(), fleet())
    _, out = decide(state, SequenceChange(command_id="probe", sequence=sequence(soak="2d")), START)
    return any(isinstance(c, CommandAck) and c.accepted for c in out)


def retries() -> bool:
    """A failed upgrade of can-1, then a retry of it: accepted, and nothing cancelled."""
    state = new_state(sequence(), fleet())
    state, out = decide(state, ReleaseTarget(event_id="r", channel="regular", targets={"1.30": NEW}), START)
    batch = next(c for c in out if isinstance(c, StageAdvance) and "can-1" in c.clusters)
    failed = UpgradeResult(
        command_id=batch.command_id, cluster="can-1", track=batch.track, version=batch.version, outcome="failed"
    )
    state, _ = decide(state, failed, START + 1)
    retry = OperatorCommand(command_id="probe", action="retry", rollout_id=batch.rollout_id, cluster="can-1")
    _, out = decide(state, retry, START + 2)
    cancelled = any(isinstance(c, RolloutTransition) and c.state is RolloutState.CANCELLED for c in out)
    return not cancelled and any(isinstance(c, CommandAck) and c.accepted for c in out)
