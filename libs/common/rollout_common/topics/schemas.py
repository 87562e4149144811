"""The published JSON Schema of each event type (BUS-2): as strict as the models the services validate with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rollout_common.envelope import TYPE_PREFIX

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def schema_id(model: type[BaseModel]) -> str:
    kind = model.model_fields["kind"].default
    return f"{TYPE_PREFIX}{kind}.v1.json"


def event_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON Schema (wire names), declaring its draft and its id."""
    schema = model.model_json_schema(by_alias=True)
    return {"$schema": DRAFT, "$id": schema_id(model), **schema}


__all__ = ["DRAFT", "event_schema", "schema_id"]
