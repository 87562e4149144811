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
