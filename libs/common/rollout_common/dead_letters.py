"""What every service puts on a dead letter (BUS-4): the record, plus `dlq_*` headers.

- `dlq_reason`: why (the decoder's message); `dlq_topic`, `dlq_partition`, `dlq_offset`: where
  it was read; `dlq_source`: which service sent it there.
- `reason_kind(reason)`: a small fixed vocabulary for metrics labels and alerting (the reason
  text itself is unbounded and must not become a label).
"""

from __future__ import annotations

from collections.abc import Mapping

from rollout_common.ports import Record

REASON_KINDS = (
    "too_large",
    "out_of_bounds",
    "bad_headers",
    "unknown_type",
    "not_json",
    "invalid_event",
    "undecodable",
    "quarantined",
    "other",
)

# Prefixes of rollout_common.envelope.decode's InvalidInputError messages.
_KIND_BY_PREFIX = (
    ("message of ", "too_large"),
    ("value exceeds a bound", "out_of_bounds"),
    ("headers exceed a bound", "out_of_bounds"),
    ("value holds", "not_json"),
    ("a header is not", "bad_headers"),
    ("missing CloudEvents header", "bad_headers"),
    ("ce_specversion", "bad_headers"),
    ("structured CloudEvent", "bad_headers"),
    ("a structured CloudEvent", "bad_headers"),
    ("datacontenttype", "bad_headers"),
    ("ce_type", "unknown_type"),
    ("value is not JSON", "not_json"),
    ("invalid ", "invalid_event"),
    ("undecodable record", "undecodable"),
    # the planner's decision raised on the event (BUS-9), or a service's handler did
    ("quarantined", "quarantined"),
)


def reason_kind(reason: str) -> str:
    """One of REASON_KINDS for a dead-letter reason."""
    for prefix, kind in _KIND_BY_PREFIX:
        if reason.startswith(prefix):
            return kind
    return "other"


def dead_letter_headers(
    record: Record, *, reason: str, source: str, extra: Mapping[str, str] | None = None
) -> dict[str, bytes]:
    """The record's own headers plus where it came from, who sent it on, why, and `extra` (`dlq_*` too)."""
    headers = {_publishable(name): value for name, value in record.headers.items()}
    headers.update(
        {
            "dlq_reason": reason.encode(errors="replace"),
            "dlq_topic": record.topic.encode(),
            "dlq_partition": str(record.partition).encode(),
            "dlq_offset": str(record.offset).encode(),
            "dlq_source": source.encode(errors="replace"),
        }
    )
    headers.update({name: value.encode(errors="replace") for name, value in (extra or {}).items()})
    return headers


def _publishable(name: str) -> str:
    """The name itself, or for one read from bytes that are not UTF-8 (lone surrogates), those
    bytes written as `\\xNN`: Kafka's header names are UTF-8, so the original cannot be sent."""
    if name.isascii():
        return name
    return name.encode(errors="surrogateescape").decode(errors="backslashreplace")


# A record near the broker's size limit plus our headers would not fit on the dead-letter topic:
# such values are cut to their start, and `dlq_truncated` says how long they were.
MAX_DEAD_LETTER_VALUE = 512 * 1024
KEPT_OF_A_LARGE_VALUE = 64 * 1024


def dead_letter(
    record: Record, *, reason: str, source: str, extra: Mapping[str, str] | None = None
) -> tuple[bytes, dict[str, bytes]]:
    """The value and headers to publish on the dead-letter topic for this record."""
    headers = dead_letter_headers(record, reason=reason, source=source, extra=extra)
    if len(record.value) <= MAX_DEAD_LETTER_VALUE:
        return record.value, headers
    headers["dlq_truncated"] = str(len(record.value)).encode()
    return record.value[:KEPT_OF_A_LARGE_VALUE], headers


__all__ = ["REASON_KINDS", "dead_letter", "dead_letter_headers", "reason_kind"]
