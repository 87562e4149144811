"""CloudEvents 1.0 over Kafka: attributes as `ce_*` headers and the model as the JSON value
(binary mode, what the services write), or the whole event as one JSON object under
`content-type: application/cloudevents+json` (structured mode, read as well).

Decoding never raises anything but `InvalidInputError`, whose text is the dead-letter reason.
Values are parsed within the bounds of `rollout_common.json_bounds`.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from pydantic import BaseModel, ValidationError

from rollout_common import json_bounds
from rollout_common.errors import InvalidInputError

SPEC_VERSION = "1.0"
TYPE_PREFIX = "io.rollout."
MAX_VALUE_BYTES = 1_000_000
MAX_HEADER_BYTES = 16_384  # names and values of all headers together
STRUCTURED_CONTENT_TYPE = "application/cloudevents+json"
_REQUIRED = ("specversion", "id", "source", "type")
_SPEC_VERSION_BYTES = SPEC_VERSION.encode()
_T = TypeVar("_T")
_JSON_BYTES = b"application/json"  # what `encode` writes as the content type
_BOTH_MODES = (
    "send CloudEvents in binary mode (headers ce_specversion, ce_id, ce_source, ce_type; the event's JSON "
    "as the value) or in structured mode (header content-type: application/cloudevents+json; the whole "
    "event, its JSON under 'data', as the value)"
)


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


def size_problem(value: bytes, headers: Mapping[str, bytes]) -> str | None:
    """Why `decode` would refuse an encoded message for its size, naming the field and the limit;
    None when it is within every size bound. For a publisher, which refuses such a message instead
    of sending what every consumer dead-letters unanswered. Meant for our own encoder's output."""
    if len(value) > MAX_VALUE_BYTES:
        return f"the message is {len(value):,} bytes, over the limit of {MAX_VALUE_BYTES:,}"
    header_bytes = sum(len(name) + len(raw) for name, raw in headers.items())
    if header_bytes > MAX_HEADER_BYTES:
        longest = max(headers, key=lambda name: len(headers[name]))
        return (
            f"the headers are {header_bytes:,} bytes ({longest} {len(headers[longest]):,}), over the limit of "
            f"{MAX_HEADER_BYTES:,}"
        )
    limit = json_bounds.MAX_STRING_BYTES
    for where, size in _string_sizes(json.loads(value), ()):
        if size > limit:
            return f"{where} is {size:,} bytes as JSON, over the limit of {limit:,} for one string"
    return None


def _string_sizes(data: Any, path: tuple[str, ...]) -> Iterator[tuple[str, int]]:
    """(field path, size as a JSON literal) of every string in `data`, keys included."""
    if isinstance(data, str):
        yield ".".join(path) or "value", len(json.dumps(data, ensure_ascii=False).encode())
    elif isinstance(data, dict):
        for key, item in data.items():
            yield from _string_sizes(key, (*path, "(a key)"))
            yield from _string_sizes(item, (*path, key))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from _string_sizes(item, (*path, str(index)))


@functools.lru_cache(maxsize=64)
def _by_type(models: tuple[type[BaseModel], ...]) -> dict[str, type[BaseModel]]:
    """ce_type -> model for a topic's models (computed once per topic, not per record)."""
    return {f"{TYPE_PREFIX}{m.model_fields['kind'].default}.v1": m for m in models if "kind" in m.model_fields}


def decode(
    value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]
) -> tuple[Envelope, BaseModel]:
    """Validate the event against the topic's models, in binary or structured mode.

    Whatever goes wrong, including an exception nobody foresaw in a validator, comes out as an
    `InvalidInputError` whose text names what is wrong: a record never stops a consumer (BUS-4).
    """
    return _refusing_surprises(_decode, value, headers, models)


def decode_event(value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]) -> BaseModel:
    """`decode`'s event alone, for a reader with no use for the envelope (the planner): the common
    case then builds none (about 1.5 µs a record). Accepts and refuses exactly what `decode` does."""
    return _refusing_surprises(_decode_event, value, headers, models)


def _refusing_surprises(
    decoder: Callable[[bytes, Mapping[str, bytes], tuple[type[BaseModel], ...]], _T],
    value: bytes,
    headers: Mapping[str, bytes],
    models: tuple[type[BaseModel], ...],
) -> _T:
    """`decoder`'s result; any exception but `InvalidInputError` becomes one, naming it."""
    try:
        return decoder(value, headers, models)
    except InvalidInputError:
        raise
    except Exception as exc:
        first_line = (str(exc).splitlines() or [""])[0][:500]
        raise InvalidInputError(f"undecodable record: {type(exc).__name__}: {first_line}") from exc


def _decode(
    value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]
) -> tuple[Envelope, BaseModel]:
    _check_size(value)
    fast = _fast_binary(headers, value, models)
    return fast if fast is not None else _general(value, headers, models)


def _decode_event(value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]) -> BaseModel:
    _check_size(value)
    fast = _fast_model(headers, value, models)
    return fast if fast is not None else _general(value, headers, models)[1]


def _check_size(value: bytes) -> None:
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidInputError(f"message of {len(value)} bytes exceeds {MAX_VALUE_BYTES}")


def _general(
    value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]
) -> tuple[Envelope, BaseModel]:
    """Any record the fast path left: every header and bound checked, each refusal worded."""
    text = _header_text(headers)
    if _media_type(text.get("content-type", "")) == STRUCTURED_CONTENT_TYPE:
        attributes, data = _structured(value)
    else:
        attributes, data = _binary(text, value)
    if attributes["specversion"] != SPEC_VERSION:
        raise InvalidInputError(f"ce_specversion {attributes['specversion']!r} is not {SPEC_VERSION}")
    parsed = _parsed(attributes["type"], data, models)
    envelope = Envelope(
        id=attributes["id"],
        source=attributes["source"],
        type=attributes["type"],
        time=attributes.get("time", ""),
        subject=attributes.get("subject"),
    )
    return envelope, parsed


def _parsed(ce_type: str, data: Any, models: tuple[type[BaseModel], ...]) -> BaseModel:
    """The event of `data` as the model its `ce_type` names (one of `models`)."""
    by_type = _by_type(models)
    model = by_type.get(ce_type)
    if model is None:
        raise InvalidInputError(f"ce_type {ce_type!r} is not one of {sorted(by_type)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise InvalidInputError(f"invalid {model.__name__}: {problems}") from exc


def _where(loc: tuple[int | str, ...]) -> str:
    """A field's path for a reason; a key from the message (a release target's minor, say) is cut, so
    that a huge key does not make a huge reason."""
    return ".".join(part if len(part) <= 40 else f"{part[:40]}..." for part in map(str, loc)) or "value"


def _fast_binary(
    headers: Mapping[str, bytes], value: bytes, models: tuple[type[BaseModel], ...]
) -> tuple[Envelope, BaseModel] | None:
    """The common case at a fraction of the cost (`_fast_model`), with its envelope."""
    parsed = _fast_model(headers, value, models)
    if parsed is None:
        return None
    get = headers.get
    ce_time, subject = get("ce_time"), get("ce_subject")
    envelope = Envelope(
        id=headers["ce_id"].decode(),
        source=headers["ce_source"].decode(),
        type=headers["ce_type"].decode(),
        time=ce_time.decode() if ce_time else "",
        subject=subject.decode() if subject is not None else None,
    )
    return envelope, parsed


def _fast_model(headers: Mapping[str, bytes], value: bytes, models: tuple[type[BaseModel], ...]) -> BaseModel | None:
    """The event of a binary-mode record whose headers are plain ASCII within their size bound and
    whose value is plainly within the bounds, validated by pydantic's own JSON parser straight from
    the bytes. Only the headers it uses are read, by name.

    None sends the record down the general path, which gives the exact reason for anything wrong:
    the fast path only ever accepts what the general path accepts, so its refusals need no text.
    ASCII names and values pass every header check of the general path (`_header_text`); a header
    that is not ASCII, ours or another's, sends the record the general way.
    """
    model = _fast_candidate(headers, _by_type(models))
    if model is None or not json_bounds.plainly_within(value):
        return None
    try:
        return model.model_validate_json(value)
    except ValidationError:
        return None


def _fast_candidate(headers: Mapping[str, bytes], by_type: Mapping[str, type[BaseModel]]) -> type[BaseModel] | None:
    """The model a record's headers name when they qualify it for the fast path (`_fast_model`), else None."""
    get = headers.get
    kind = get("ce_type")
    if not kind or not get("ce_id") or not get("ce_source") or get("ce_specversion") != _SPEC_VERSION_BYTES:
        return None
    content_type = get("content-type")
    if content_type is not None and content_type != _JSON_BYTES:
        return None  # structured mode, a charset parameter, or anything else: looked at closely
    values = b"".join(headers.values())
    names = "".join(headers)
    if len(values) + len(names) > MAX_HEADER_BYTES or not values.isascii() or not names.isascii():
        return None
    return by_type.get(kind.decode())


def decode_events(
    items: Sequence[tuple[bytes, Mapping[str, bytes]]], models: tuple[type[BaseModel], ...]
) -> list[BaseModel | InvalidInputError]:
    """`decode_event` of each (value, headers), in order, a refusal returned as its error: the same
    models and the same refusals, at less cost a record for a poll's worth.

    The records whose headers qualify for the fast path are grouped by model; a group's values are
    looked at within the bounds together (`json_bounds.each_plainly_within`) and validated one after
    another in one C-level loop. When anything in a group fails, each of its records goes
    `decode_event`'s way, which words the refusal; every other record goes that way at once.
    """
    by_type = _by_type(models)
    outcomes: list[BaseModel | InvalidInputError | None] = [None] * len(items)
    groups: dict[type[BaseModel], list[int]] = {}
    for index, (value, headers) in enumerate(items):
        model = _fast_candidate(headers, by_type) if len(value) <= MAX_VALUE_BYTES else None
        if model is None:
            outcomes[index] = _event_or_refusal(value, headers, models)
        else:
            groups.setdefault(model, []).append(index)
    for model, indexes in groups.items():
        parsed = _validated_together(model, [items[index][0] for index in indexes])
        for position, index in enumerate(indexes):
            value, headers = items[index]
            outcomes[index] = parsed[position] if parsed is not None else _event_or_refusal(value, headers, models)
    return cast("list[BaseModel | InvalidInputError]", outcomes)


def _validated_together(model: type[BaseModel], values: list[bytes]) -> list[BaseModel] | None:
    """Each value as `model`, when every one is plainly within the bounds and valid; else None."""
    if not json_bounds.each_plainly_within(values):
        return None
    # What `model_validate_json` calls, without a Python frame a record.
    validate = model.__pydantic_validator__.validate_json
    try:
        return list(map(validate, values))
    except Exception:  # any failure: each record is then decoded alone, which words it
        return None


def _event_or_refusal(
    value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]
) -> BaseModel | InvalidInputError:
    try:
        return decode_event(value, headers, models)
    except InvalidInputError as exc:
        return exc


def _header_text(headers: Mapping[str, bytes]) -> dict[str, str]:
    """Our headers (CloudEvents' and the content type) as text, in one pass: the size bound is
    judged before a header that is not UTF-8, as the first refusal to name."""
    size = 0
    text: dict[str, str] = {}
    not_text: str | None = None
    for name, raw in headers.items():
        size += len(name) + (len(raw) if raw else 0)
        if not name.isascii():
            _check_name(name)
        if name[:3] == "ce_" or name == "content-type":
            try:
                text[name] = raw.decode() if raw else ""
            except UnicodeDecodeError:
                not_text = not_text or name
        # others (a binary trace context, say) are not ours to read
    if size > MAX_HEADER_BYTES:
        raise InvalidInputError(f"headers exceed a bound: {size} bytes (limit {MAX_HEADER_BYTES})")
    if not_text is not None:
        raise InvalidInputError(f"a header is not UTF-8: {not_text!r}")
    return text


def _check_name(name: str) -> None:
    """A header name read from bytes that are not UTF-8 holds lone surrogates (the Kafka adapter
    reads them with `surrogateescape` rather than stop at them): such a record is refused whole."""
    try:
        name.encode()
    except UnicodeEncodeError as exc:
        raw = name.encode(errors="surrogateescape")
        raise InvalidInputError(f"a header is not UTF-8: the name {raw!r}") from exc


def _media_type(content_type: str) -> str:
    """`application/cloudevents+json; charset=UTF-8` -> `application/cloudevents+json`."""
    return content_type.split(";", 1)[0].strip().lower()


def _binary(text: Mapping[str, str], value: bytes) -> tuple[dict[str, str], Any]:
    missing = [f"ce_{name}" for name in _REQUIRED if not text.get(f"ce_{name}")]
    if missing:
        raise InvalidInputError(f"missing CloudEvents header(s): {', '.join(missing)}; {_BOTH_MODES}")
    attributes = {name[3:]: v for name, v in text.items() if name.startswith("ce_")}
    return attributes, json_bounds.parse(value)


def _structured(value: bytes) -> tuple[dict[str, str], Any]:
    event = json_bounds.parse(value)
    if not isinstance(event, dict):
        raise InvalidInputError(f"a structured CloudEvent must be a JSON object; {_BOTH_MODES}")
    missing = [name for name in _REQUIRED if not (isinstance(event.get(name), str) and event[name])]
    if missing:
        raise InvalidInputError(f"structured CloudEvent without attribute(s): {', '.join(missing)}; {_BOTH_MODES}")
    content_type = event.get("datacontenttype", "application/json")
    if not isinstance(content_type, str) or not _media_type(content_type).endswith(("/json", "+json")):
        raise InvalidInputError(f"datacontenttype {content_type!r} is not JSON")
    if "data" in event:
        data = event["data"]
    elif isinstance(event.get("data_base64"), str):
        data = json_bounds.parse(base64.b64decode(event["data_base64"], validate=True))
    else:
        raise InvalidInputError("structured CloudEvent without data: put the event's JSON under 'data'")
    attributes = {name: v for name, v in event.items() if isinstance(v, str) and name not in ("data", "data_base64")}
    return attributes, data
