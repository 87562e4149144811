"""CHK-3 start windows: a track of a stage starts a version only inside the stage's start window.

Until the window opens the run stays PENDING, keeping its offer, and says when it opens; a timer
lets it in then. Once started, the stage goes on outside the window (the clusters' own windows
still apply, WIN-1).
"""

from __future__ import annotations

from rollout_common.commands import Wait
from rollout_common.status import StageReason, StageState, WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.model import EngineState, Offer, Run, StageRec
from rollout_planner.engine.runs import transition


def hold_for_window(state: EngineState, stage: StageRec, run: Run, offer: Offer) -> bool:
    """The stage's start window is closed: the run waits PENDING until it opens (a timer then)."""
    window = stage.spec.start_window
    if window is None or window.is_open(state.now):
        return False
    opens = window.next_open(state.now)
    run.held_offer = offer
    when = "never (the window has no later occurrence)" if opens is None else from_epoch(opens).isoformat()
    transition(state, run, StageState.PENDING, StageReason.START_WINDOW, detail=f"the window opens at {when} (CHK-3)")
    if opens is not None:
        state.add_run_timer(opens, "window", stage=run.stage, track=run.track, rollout_id=run.rollout_id)
    return True


def held_by_window(run: Run) -> bool:
    """A run PENDING with an offer in hand waits for its stage's start window."""
    return run.state is StageState.PENDING and run.held_offer is not None


def start_window_waits(state: EngineState, stage: StageRec, track: int) -> list[Wait]:
    """STAT-5: a track held by its stage's start window says when the window opens (status calls only)."""
    window = stage.spec.start_window
    if window is None:
        return []
    waits = []
    for run in stage.runs[track].values():
        if not held_by_window(run):
            continue
        opens = window.next_open(state.now)
        waits.append(
            Wait(
                rule=WaitRule.CHK_3_START_WINDOW.value,
                # when it opens is the wait's `until`; a window with no later occurrence says so
                message=f"rollout {run.rollout_id} waits for the start window of stage {stage.spec.name} (CHK-3)"
                + ("" if opens is not None else ": it has no later occurrence"),
                until=opens,
                numbers={"rollout": run.rollout_id, "opensAt": opens},
            )
        )
    return waits
