"""CloudEvents 1.0 in Kafka binary mode: attributes as `ce_*` headers, the model as the JSON value.

Decoding never raises anything but `InvalidInputError`, whose text is the dead-letter reason.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from rollout_common.errors import InvalidInputError

SPEC_VERSION = "1.0"
TYPE_PREFIX = "io.rollout."
MAX_VALUE_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class Envelope:
    id: str
    source: str
    type: str
    time: str
    subject: str | None


def event_type(model: BaseModel) -> str:
    kind = getattr(model, "kind", type(model).__name__)
    return f"{TYPE_PREFIX}{kind}.v1"


def encode(
    model: BaseModel, *, event_id: str, source: str, at: float, subject: str | None = None
) -> tuple[bytes, dict[str, bytes]]:
    headers = {
        "ce_specversion": SPEC_VERSION.encode(),
        "ce_id": event_id.encode(),
        "ce_source": source.encode(),
        "ce_type": event_type(model).encode(),
        "ce_time": dt.datetime.fromtimestamp(at, tz=dt.UTC).isoformat().encode(),
        "content-type": b"application/json",
    }
    if subject:
        headers["ce_subject"] = subject.encode()
    return model.model_dump_json(by_alias=True).encode(), headers


@functools.lru_cache(maxsize=64)
def _by_type(models: tuple[type[BaseModel], ...]) -> dict[str, type[BaseModel]]:
    """ce_type -> model for a topic's models (computed once per topic, not per record)."""
    return {f"{TYPE_PREFIX}{m.model_fields['kind'].default}.v1": m for m in models if "kind" in m.model_fields}


def decode(
    value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]
) -> tuple[Envelope, BaseModel]:
    """Validate headers and body against the topic's models; the error text names what is wrong."""
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidInputError(f"message of {len(value)} bytes exceeds {MAX_VALUE_BYTES}")
    try:
        text = {k: v.decode() for k, v in headers.items()}
    except UnicodeDecodeError as exc:
        raise InvalidInputError("a header is not UTF-8") from exc
    missing = [h for h in ("ce_specversion", "ce_id", "ce_source", "ce_type") if not text.get(h)]
    if missing:
        raise InvalidInputError(f"missing CloudEvents header(s): {', '.join(missing)}")
    if text["ce_specversion"] != SPEC_VERSION:
        raise InvalidInputError(f"ce_specversion {text['ce_specversion']!r} is not {SPEC_VERSION}")
    by_type = _by_type(models)
    model = by_type.get(text["ce_type"])
    if model is None:
        raise InvalidInputError(f"ce_type {text['ce_type']!r} is not one of {sorted(by_type)}")
    try:
        body = json.loads(value)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"value is not JSON: {exc}") from exc
    try:
        parsed = model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:5])
        raise InvalidInputError(f"invalid {model.__name__}: {problems}") from exc
    envelope = Envelope(
        id=text["ce_id"],
        source=text["ce_source"],
        type=text["ce_type"],
        time=text.get("ce_time", ""),
        subject=text.get("ce_subject"),
    )
    return envelope, parsed
