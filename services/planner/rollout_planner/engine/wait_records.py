"""The reasons a stage's dispatch pass recorded for not handing out more, kept for status (STAT-5)."""

from __future__ import annotations

from rollout_common.commands import WaitChanged
from rollout_common.status import TRACKS, WaitRule
from rollout_planner.engine.model import EngineState, PartitionRec, StageRec

# (rule, partition or None, the numbers its sentence names)
WaitTuple = tuple[str, str | None, dict[str, object]]


def window_wait(blocked: list[tuple[float, str]]) -> WaitTuple:
    """WIN-4: which clusters gave up their turn, and when the first of them can start."""
    blocked.sort()
    opens = blocked[0][0]
    return (
        WaitRule.WIN_MAINTENANCE.value,
        None,
        {
            "waiting": len(blocked),
            "nextOpen": None if opens == float("inf") else opens,
            "clusters": [name for _, name in blocked[:20]],
        },
    )


def gate_1_wait(waits: list[WaitTuple], partition: PartitionRec, unavailable: int) -> None:
    waits.append(
        (
            WaitRule.GATE_1_MAX_UNAVAILABLE.value,
            partition.name,
            {"unavailable": unavailable, "maxUnavailable": partition.max_unavailable},
        )
    )


def record_waits(state: EngineState, stage: StageRec, track: int, waits: list[WaitTuple]) -> None:
    """Keep the latest reasons for status; tell the progress stream when the kind of wait changes."""
    stage.waits[track] = waits
    keys = tuple((rule, part) for rule, part, _ in waits)
    if keys == stage.wait_keys[track]:
        return
    stage.wait_keys[track] = keys
    run = stage.latest_run(track)
    if run is None:
        return
    from rollout_planner.engine.reasons import describe_waits

    state.emit(
        WaitChanged(
            rollout_id=run.rollout_id,
            stage=stage.spec.name,
            track=TRACKS[track],
            waits=tuple(describe_waits(state, stage, track)),
        )
    )
