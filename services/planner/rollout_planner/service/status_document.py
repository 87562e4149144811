"""The status document written to the store after every batch: readable without Kafka (STAT-2..5)."""

from __future__ import annotations

import json
from typing import Any

from rollout_planner.engine.model import EngineState, RolloutRec
from rollout_planner.engine.views import stage_view


def status_document(state: EngineState, *, batch: int) -> dict[str, Any]:
    return {
        "sequence": state.sequence.name,
        "channel": state.sequence.channel,
        "now": state.now,
        "batch": batch,
        "clusters": len(state.clusters),
        "stages": [stage_view(state, stage) for stage in state.stages],
        "rollouts": [_rollout_view(rollout) for rollout in state.rollouts.values()],
    }


def encode_status(state: EngineState, *, batch: int) -> bytes:
    return json.dumps(status_document(state, batch=batch), default=str).encode()


def _rollout_view(rollout: RolloutRec) -> dict[str, Any]:
    return {
        "id": rollout.id,
        "eventId": rollout.event_id,
        "state": rollout.state.value,
        "reason": rollout.reason,
        "createdAt": rollout.created_at,
        "versions": [version.text for version in rollout.versions()],
        "targets": {str(minor): v.text for minor, v in (rollout.by_minor or {}).items()},
        "onDemand": rollout.on_demand,
    }
