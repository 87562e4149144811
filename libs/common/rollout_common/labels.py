"""Label maps: Kubernetes labels are strings, but YAML turns `canary: true` into a boolean."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema


def _stringify(value: object) -> object:
    if not isinstance(value, dict):
        return value
    return {str(k): _scalar_text(v) for k, v in value.items()}


def _scalar_text(value: object) -> object:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


# YAML and JSON writers may give a label as a number or a boolean; it is read as its text.
LabelMap = Annotated[
    dict[str, str],
    BeforeValidator(_stringify),
    WithJsonSchema({"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}),
]
