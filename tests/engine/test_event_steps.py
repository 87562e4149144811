"""`decide` finds each event's step by its type (no match over the kinds): every kind of the
engine's event union has one, and an event on its own is applied as it is in a batch."""

from __future__ import annotations

import json
from typing import get_args

from enginekit import T0, V31, cluster, sequence, stage

from rollout_common.commands import Command, StageAdvance
from rollout_common.events import Event, EventBatch, InventoryChange, Readiness, ReleaseTarget, UpgradeResult
from rollout_planner.engine import new_state
from rollout_planner.engine.decide import _STEPS, decide


def test_every_event_kind_has_a_step() -> None:
    kinds = set(get_args(get_args(Event)[0]))
    assert kinds == {*_STEPS, InventoryChange}


def _decisions(*, batched: bool) -> list[str]:
    """A release, then each batch's upgrades succeeding and its clusters reporting ready."""
    state = new_state(sequence(stage("prod")), [cluster(f"prod-{i}") for i in range(3)])
    said: list[str] = []

    def send(event: Event, at: float) -> list[Command]:
        _, out = decide(state, EventBatch(events=(event,)) if batched else event, T0 + at)
        said.extend(command.model_dump_json() for command in out)
        return out

    out = send(ReleaseTarget(event_id="rel-1", channel="regular", targets={"1.30": V31}), 0)
    for at in range(1, 10):
        advances = [command for command in out if isinstance(command, StageAdvance)]
        out = []
        for advance in advances:
            for name in advance.clusters:
                result = UpgradeResult(
                    command_id=advance.command_id,
                    cluster=name,
                    track=advance.track,
                    version=advance.version,
                    outcome="succeeded",
                )
                out += send(result, at)
                out += send(Readiness(cluster=name, ready=True), at)
    return said


def test_an_event_alone_and_in_a_batch_decide_the_same() -> None:
    alone = _decisions(batched=False)
    assert alone == _decisions(batched=True)
    advances = [json.loads(said) for said in alone if '"kind":"stage_advance"' in said]
    assert sorted((a["track"], name) for a in advances for name in a["clusters"]) == [  # every cluster, both tracks
        (track, f"prod-{i}") for track in ("controlPlane", "nodes") for i in range(3)
    ]
