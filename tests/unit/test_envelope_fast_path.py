"""The envelope's fast path (pydantic's JSON parser on the raw bytes) accepts only what the bounded
path accepts (BUS-4): a value it cannot plainly see within the bounds goes the bounded way and is
refused with the bounded path's reason."""

from __future__ import annotations

import pytest

from rollout_common import envelope, json_bounds
from rollout_common.errors import InvalidInputError
from rollout_common.events import Readiness
from rollout_common.topics.catalog import READINESS

HEADERS = envelope.encode(Readiness(cluster="c-1", ready=True), event_id="e-1", source="test", at=1.0)[1]


def _decode(value: bytes) -> Readiness:
    _, model = envelope.decode(value, HEADERS, READINESS.models)
    assert isinstance(model, Readiness)
    return model


def test_a_plain_event_decodes_to_the_same_model_as_the_bounded_path() -> None:
    value = b'{"kind": "readiness", "cluster": "c-1", "ready": false, "reason": "x", "observedAt": 1764601234.25}'
    assert json_bounds.plainly_within(value)
    assert _decode(value) == Readiness.model_validate(json_bounds.parse(value))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_bus4_a_non_finite_number_in_a_valid_field_is_refused(literal: str) -> None:
    # pydantic's JSON parser reads NaN and Infinity into a float field: the fast path must not see them.
    value = f'{{"kind": "readiness", "cluster": "c-1", "ready": true, "observedAt": {literal}}}'.encode()
    with pytest.raises(InvalidInputError, match=f"value holds {literal}, which JSON does not allow"):
        _decode(value)


def test_bus4_a_number_over_the_length_bound_in_a_valid_field_is_refused() -> None:
    number = "1." + "0" * 45  # 47 characters, a perfectly valid float to pydantic
    value = f'{{"kind": "readiness", "cluster": "c-1", "ready": true, "observedAt": {number}}}'.encode()
    with pytest.raises(InvalidInputError, match="value exceeds a bound: a number of 47 characters"):
        _decode(value)


def test_plainly_within_is_conservative() -> None:
    assert not json_bounds.plainly_within(b"[" * (json_bounds.MAX_DEPTH + 1))
    assert not json_bounds.plainly_within(b'{"a": "' + b"x" * json_bounds.MAX_STRING_BYTES + b'"}')
    assert not json_bounds.plainly_within(b'{"a": 1234567890123}')  # 13 digits in a row: looked at closely
    assert json_bounds.plainly_within(b'{"a": 123456789012, "b": [[1.5e-3]]}')
    assert not json_bounds.plainly_within(b'{"a": NaN}')
    assert not json_bounds.plainly_within(b'{"a": -Infinity}')
    assert not json_bounds.plainly_within(b'{"a": "an Infinity inside a string counts too"}')
    assert json_bounds.plainly_within(b'{"name": "NodePool-Infra", "note": "Not a number, nor Infinite"}')


def test_bus4_bus7_a_time_that_overflows_to_infinity_is_refused_on_the_fast_path() -> None:
    # pydantic's JSON parser reads 1e99999 as infinity: a readiness observed "at infinity" made every
    # later observation of its cluster older, for good; the bounded path names the literal.
    value = b'{"kind": "readiness", "cluster": "d-09", "ready": false, "observedAt": 1e99999}'
    assert json_bounds.plainly_within(value)
    with pytest.raises(InvalidInputError, match="value holds 1e99999, which overflows a double"):
        _decode(value)


@pytest.mark.parametrize("literal", ["1e38", "253402300800", "-1"])
def test_bus7_a_time_beyond_any_clock_is_refused_naming_the_field(literal: str) -> None:
    """1e38 is finite, and was applied: every real observation of d-09 after it was older (GATE-1 held)."""
    value = f'{{"kind": "readiness", "cluster": "d-09", "ready": false, "observedAt": {literal}}}'.encode()
    with pytest.raises(InvalidInputError, match=r"^invalid Readiness: observedAt: Input should be"):
        _decode(value)


def test_bus7_the_latest_time_a_message_may_carry_is_the_end_of_year_9999() -> None:
    value = b'{"kind": "readiness", "cluster": "d-09", "ready": false, "observedAt": 253402300799}'
    assert _decode(value).observed_at == 253_402_300_799.0


def _outcome(value: bytes, headers: dict[str, bytes]) -> tuple[str, object]:
    try:
        found, model = envelope.decode(value, headers, READINESS.models)
    except InvalidInputError as exc:
        return "refused", str(exc)
    return "decoded", (found, model)


def _event_outcome(value: bytes, headers: dict[str, bytes]) -> tuple[str, object]:
    try:
        model = envelope.decode_event(value, headers, READINESS.models)
    except InvalidInputError as exc:
        return "refused", str(exc)
    return "decoded", model


_HEADER_CHOICES: list[tuple[str, list[bytes]]] = [
    ("ce_specversion", [b"1.0", b"0.3", b"", b"1.0\xff"]),
    ("ce_id", [b"e-1", b"", "é".encode(), b"\xff\xfe"]),
    ("ce_source", [b"test", b"", b"\xc3"]),
    ("ce_type", [b"io.rollout.readiness.v1", b"io.rollout.heartbeat.v1", b"", "io.rollout.readiness.v1é".encode()]),
    ("ce_time", [b"2026-12-03T08:00:00+00:00", b"", b"\x80"]),
    ("ce_subject", [b"c-1", b"", b"\xff"]),
    ("content-type", [b"application/json", b"application/json; charset=utf-8", b"application/cloudevents+json", b""]),
    ("traceparent", [b"00-abc-def-01", b"\x00\x01\xfe\xff", b"x" * 16_300]),
    ("ce_extension", [b"plain", b"\xff"]),  # not read, but the general path refuses it not UTF-8
    ("\udcff-name", [b"v"]),
    ("nämé", [b"v"]),
]


@pytest.mark.parametrize("seed", range(20))
def test_bus4_the_fast_path_decides_every_header_set_as_the_general_path_does(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generated header sets (each header absent or one of its variants: empty, not UTF-8, not ASCII,
    oversized, structured mode): decoded with the fast path and with it turned off, the outcome is
    the same model and envelope, or the same refusal; and `decode_event` (the planner's, which
    builds no envelope) gives the same model or the same refusal as well."""
    import random

    rng = random.Random(seed)
    values = [
        b'{"kind":"readiness","cluster":"c-1","ready":true,"observedAt":1764601234.25}',
        b'{"kind":"readiness","cluster":"c-1","ready":"yes"}',
        b'{"specversion":"1.0","id":"e-9","source":"s","type":"io.rollout.readiness.v1",'
        b'"data":{"kind":"readiness","cluster":"c-2","ready":false}}',
    ]
    cases = []
    for _ in range(300):
        headers = {
            name: variants[0] if rng.random() < 0.8 else rng.choice(variants)  # mostly the good one
            for name, variants in _HEADER_CHOICES
            if rng.random() < (0.9 if name.startswith(("ce_", "content")) else 0.15)
        }
        cases.append((rng.choice(values), headers))
    fast = [_outcome(value, headers) for value, headers in cases]
    events = [_event_outcome(value, headers) for value, headers in cases]
    monkeypatch.setattr(envelope, "_fast_model", lambda *args: None)
    general = [_outcome(value, headers) for value, headers in cases]
    assert fast == general
    assert events == [(kind, found[1] if kind == "decoded" else found) for kind, found in general]  # type: ignore[index]
    assert {kind for kind, _ in fast} == {"decoded", "refused"}


def test_bus4_decode_event_refuses_a_value_over_the_size_bound_as_decode_does() -> None:
    value = b'{"kind":"readiness","cluster":"c-1","ready":true,"reason":"' + b"x" * envelope.MAX_VALUE_BYTES + b'"}'
    with pytest.raises(InvalidInputError) as by_decode:
        envelope.decode(value, HEADERS, READINESS.models)
    with pytest.raises(InvalidInputError) as by_event:
        envelope.decode_event(value, HEADERS, READINESS.models)
    assert str(by_event.value) == str(by_decode.value)
    assert str(by_event.value).startswith(f"message of {len(value)} bytes exceeds {envelope.MAX_VALUE_BYTES}")
