"""The envelope's fast path (pydantic's JSON parser on the raw bytes) accepts only what the bounded
path accepts (BUS-4): a value it cannot plainly see within the bounds goes the bounded way and is
refused with the bounded path's reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from pydantic import BaseModel

from rollout_common import envelope, json_bounds
from rollout_common.errors import InvalidInputError
from rollout_common.events import Readiness
from rollout_common.topics.catalog import READINESS, UPGRADE_RESULTS

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
    together = [
        ("refused", str(outcome)) if isinstance(outcome, InvalidInputError) else ("decoded", outcome)
        for outcome in envelope.decode_events(cases, READINESS.models)
    ]
    assert together == events
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


# -- a poll decoded at once (`decode_events`) ------------------------------------------------------

_GOOD_READINESS = b'{"kind":"readiness","cluster":"c-%d","ready":true,"observedAt":1764601234.25}'
_GOOD_RESULT = (
    b'{"kind":"upgrade_result","commandId":"b-%d","cluster":"c-1","track":"nodes",'
    b'"version":"1.31.13-gke.1023000","outcome":"succeeded"}'
)
# Each is refused alone; in a poll of good records it makes its model's group fall back.
_SPOILERS = [
    b'{"kind":"readiness","cluster":"c-1","ready":true,"observedAt":NaN}',
    b'{"kind":"readiness","cluster":"c-1","ready":true,"observedAt":-Infinity}',
    b'{"kind":"readiness","cluster":"c-1","ready":true,"observedAt":1.' + b"0" * 45 + b"}",
    b'{"kind":"readiness","cluster":"c-1","ready":true,"observedAt":1e99999}',
    b'{"kind":"readiness","cluster":"c-1","ready":"yes"}',
    b'{"kind":"readiness","cluster":"c-1","ready":true,"extra":' + b"[" * 40 + b"]" * 40 + b"}",
    b'{"kind":"readiness","cluster":"c-1","ready":true,"reason":"' + b"x" * json_bounds.MAX_STRING_BYTES + b'"}',
    b'{"kind":"readiness","cluster":"c-1","ready":true,"reason":"' + b"x" * envelope.MAX_VALUE_BYTES + b'"}',
    b'{"kind":"readiness","cluster":"c-1","ready":true,"reason":"a"',  # cut short
    b'{"kind":"readiness","cluster":"c-1","ready":true}, {"kind":"readiness","cluster":"c-2","ready":true}',
    b'{"kind":"upgrade_result","commandId":"","cluster":"c-1","track":"nodes","version":"1.31","outcome":"x"}',
    b"",
]
_MODELS = (Readiness, *UPGRADE_RESULTS.models)


def _one_by_one(items: list[tuple[bytes, dict[str, bytes]]]) -> list[tuple[str, object]]:
    return [_event_outcome(value, headers) for value, headers in items]


def _together(items: list[tuple[bytes, dict[str, bytes]]]) -> list[tuple[str, object]]:
    return [
        ("refused", str(outcome)) if isinstance(outcome, InvalidInputError) else ("decoded", outcome)
        for outcome in envelope.decode_events(items, _MODELS)
    ]


def _event_outcome_of(models: tuple[type[BaseModel], ...]) -> Callable[[bytes, dict[str, bytes]], tuple[str, object]]:
    def outcome(value: bytes, headers: dict[str, bytes]) -> tuple[str, object]:
        try:
            return "decoded", envelope.decode_event(value, headers, models)
        except InvalidInputError as exc:
            return "refused", str(exc)

    return outcome


@pytest.mark.parametrize("seed", range(30))
def test_bus4_a_poll_decoded_at_once_gives_each_record_what_it_gets_alone(seed: int) -> None:
    """Generated polls of 1 to 60 records of two models, interleaved: mostly good ones, sometimes a
    record the bounds or the model refuse (a non-finite or over-long number, nesting over the bound,
    a string over the bound, a value over the size bound, cut short, two events in one value), and
    sometimes headers that send a record the general way. `decode_events` gives each record the
    model or the refusal `decode_event` gives it alone, in the poll's order."""
    import random

    rng = random.Random(seed)
    readiness_headers = HEADERS
    result_headers = {**HEADERS, "ce_type": b"io.rollout.upgrade_result.v1"}
    one_by_one = _event_outcome_of(_MODELS)
    items: list[tuple[bytes, dict[str, bytes]]] = []
    for index in range(rng.randint(1, 60)):
        roll = rng.random()
        if roll < 0.05:
            items.append((rng.choice(_SPOILERS), readiness_headers))
        elif roll < 0.08:
            items.append((_GOOD_READINESS % index, {**readiness_headers, "content-type": b"application/json; x=1"}))
        elif roll < 0.4:
            items.append((_GOOD_RESULT % index, result_headers))
        else:
            items.append((_GOOD_READINESS % index, readiness_headers))
    together = _together(items)
    assert together == [one_by_one(value, headers) for value, headers in items]


def test_bus4_one_spoiler_in_a_poll_is_refused_with_its_own_reason_and_the_rest_decode() -> None:
    good = [(_GOOD_READINESS % index, HEADERS) for index in range(5)]
    for spoiler in _SPOILERS:
        items = [*good[:2], (spoiler, HEADERS), *good[2:]]
        outcomes = _together(items)
        assert [kind for kind, _ in outcomes] == ["decoded", "decoded", "refused", "decoded", "decoded", "decoded"]
        assert outcomes[2] == _event_outcome(spoiler, HEADERS)
        assert [found.cluster for kind, found in outcomes if kind == "decoded"] == [  # type: ignore[attr-defined]
            "c-0",
            "c-1",
            "c-2",
            "c-3",
            "c-4",
        ]


def test_bus4_the_bounds_of_values_looked_at_together_are_each_values_bounds() -> None:
    """No forbidden literal spans two values joined (a space ends every run and literal)."""
    assert json_bounds.each_plainly_within([])
    assert json_bounds.each_plainly_within([b'{"a": "Na"}', b'{"b": "N"}'])
    assert json_bounds.each_plainly_within([b"1234567890", b"12345678901"])
    assert not json_bounds.each_plainly_within([b"{}", b'{"a": 1234567890123}'])
    assert not json_bounds.each_plainly_within([b"{}", b"[" * 20 + b"{" * 13])
    assert json_bounds.each_plainly_within([b"[" * 20 + b"{" * 12, b"[" * 20 + b"{" * 12])
    assert not json_bounds.each_plainly_within([b"{}", b"x" * (json_bounds.MAX_STRING_BYTES + 1)])


def test_a_poll_of_plain_records_is_validated_together_and_a_spoiled_group_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alone: list[bytes] = []
    decode_event = envelope.decode_event

    def counted(value: bytes, headers: Mapping[str, bytes], models: tuple[type[BaseModel], ...]) -> BaseModel:
        alone.append(value)
        return decode_event(value, headers, models)

    monkeypatch.setattr(envelope, "decode_event", counted)
    result_headers = {**HEADERS, "ce_type": b"io.rollout.upgrade_result.v1"}
    readiness = [(_GOOD_READINESS % index, HEADERS) for index in range(3)]
    results = [(_GOOD_RESULT % index, result_headers) for index in range(2)]
    assert len(envelope.decode_events([*readiness, *results], _MODELS)) == 5
    assert alone == []
    spoiled = [*readiness, (_SPOILERS[0], HEADERS), *results]
    outcomes = envelope.decode_events(spoiled, _MODELS)
    assert alone == [value for value, _ in [*readiness, (_SPOILERS[0], HEADERS)]]  # the results' group held
    assert [type(outcome).__name__ for outcome in outcomes] == [
        "Readiness",
        "Readiness",
        "Readiness",
        "InvalidInputError",
        "UpgradeResult",
        "UpgradeResult",
    ]
