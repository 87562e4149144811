"""Where a planner without a snapshot gets its sequence and fleet from.

Either a scenario/fleet file named in the settings (sequence and clusters), or the sequence
that `rollout apply` stored under the key `sequence`, with the fleet arriving afterwards as
inventory upserts on the inventory topic.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rollout_common.errors import InvalidInputError
from rollout_common.ports import Store
from rollout_common.sequence import Sequence
from rollout_planner.engine import EngineState, new_state
from rollout_planner.service.checkpoint import SEQUENCE_KEY
from rollout_planner.simulation.scenario import ScenarioError, load_scenario


def from_file(path: Path) -> EngineState:
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        raise InvalidInputError(str(exc)) from exc
    return new_state(scenario.sequence, scenario.fleet(), scenario.cluster_groups)


async def from_store(store: Store) -> EngineState | None:
    raw = await store.get(SEQUENCE_KEY)
    if raw is None:
        return None
    try:
        sequence = Sequence.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidInputError(f"store key {SEQUENCE_KEY!r} holds no valid sequence: {exc}") from exc
    return new_state(sequence, [])
