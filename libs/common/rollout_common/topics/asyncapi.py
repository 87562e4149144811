"""The AsyncAPI 3 document of every topic and message, generated from the topic catalog (BUS-2).

Each message's payload is its event schema (`topics.schemas`), with the schemas it refers to moved
to `components.schemas` so every `$ref` resolves inside the one document.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from rollout_common.envelope import SPEC_VERSION, TYPE_PREFIX
from rollout_common.topics.catalog import ALL, INVENTORY, OPERATOR_COMMANDS, RELEASE_TARGETS, TopicDef

ASYNCAPI_VERSION = "3.1.0"
# Topics a user of the system publishes to; every topic can be read.
_USER_SENDS = frozenset({RELEASE_TARGETS.name, OPERATOR_COMMANDS.name, INVENTORY.name})

_CE_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "CloudEvents 1.0 Kafka binding, binary mode: the attributes as ce_* headers",
    "required": ["ce_specversion", "ce_id", "ce_source", "ce_type"],
    "properties": {
        "ce_specversion": {"type": "string", "const": SPEC_VERSION},
        "ce_id": {"type": "string", "minLength": 1, "description": "event id; the same id is one event"},
        "ce_source": {"type": "string", "minLength": 1},
        "ce_type": {"type": "string", "pattern": f"^{TYPE_PREFIX.replace('.', '[.]')}[a-z_]+[.]v1$"},
        "ce_time": {"type": "string", "format": "date-time"},
        "ce_subject": {"type": "string"},
        "content-type": {"type": "string", "const": "application/json"},
    },
}


def channel_id(topic: TopicDef) -> str:
    first, *rest = topic.name.removeprefix("rollout.").split("-")
    return first + "".join(part.capitalize() for part in rest)


def message_id(model: type[BaseModel]) -> str:
    return str(model.model_fields["kind"].default)


def document(*, version: str, server: str = "localhost:9092") -> dict[str, Any]:
    """The AsyncAPI 3.0 document (a JSON-able dict)."""
    schemas: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for topic in ALL:
        cid = channel_id(topic)
        for model in topic.models:
            messages[message_id(model)] = _message(model, schemas)
        channels[cid] = _channel(topic)
        operations.update(_operations(topic, cid))
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "rollout",
            "version": version,
            "description": "Staged, gated Kubernetes fleet upgrades over Kafka: every topic and event. Topic names "
            "take the deployment's prefix (ROLLOUT_TOPIC_PREFIX) in front.",
        },
        "defaultContentType": "application/json",
        "servers": {"kafka": {"host": server, "protocol": "kafka", "description": "the deployment's brokers"}},
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def _channel(topic: TopicDef) -> dict[str, Any]:
    return {
        "address": topic.name,
        "description": topic.doc,
        "messages": {message_id(m): {"$ref": f"#/components/messages/{message_id(m)}"} for m in topic.models},
        "bindings": {"kafka": _channel_binding(topic)},
    }


def _operations(topic: TopicDef, cid: str) -> dict[str, Any]:
    """Every topic can be read; the ones a user of the system publishes to can be sent to as well."""
    ref = {"$ref": f"#/channels/{cid}"}
    operations = {f"read{cid[0].upper()}{cid[1:]}": {"action": "receive", "channel": ref, "summary": topic.doc}}
    if topic.name in _USER_SENDS:
        operations[f"publish{cid[0].upper()}{cid[1:]}"] = {"action": "send", "channel": ref, "summary": topic.doc}
    return operations


def _message(model: type[BaseModel], schemas: dict[str, Any]) -> dict[str, Any]:
    kind = message_id(model)
    payload = model.model_json_schema(by_alias=True, ref_template="#/components/schemas/{model}")
    for name, definition in payload.pop("$defs", {}).items():
        schemas[name] = definition
    return {
        "name": kind,
        "title": model.__name__,
        "summary": (model.__doc__ or kind).strip().splitlines()[0],
        "contentType": "application/json",
        "headers": _CE_HEADERS,
        "payload": payload,
        "x-ce-type": f"{TYPE_PREFIX}{kind}.v1",
    }


def _channel_binding(topic: TopicDef) -> dict[str, Any]:
    config: dict[str, Any] = {"cleanup.policy": ["compact"] if topic.compacted else ["delete"]}
    if not topic.compacted and topic.retention_ms is not None:
        config["retention.ms"] = topic.retention_ms
    return {
        "topic": topic.name,
        "partitions": topic.partitions,
        "topicConfiguration": config,
        "bindingVersion": "0.5.0",
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


__all__ = ["ASYNCAPI_VERSION", "channel_id", "document", "dumps", "message_id"]
