"""Records read by our consumers are built once, as the port's `Record`, inside aiokafka's fetcher.

aiokafka (0.14) turns each record its compiled reader unpacks into a `ConsumerRecord` (eleven
fields, the key's and value's sizes measured, the headers copied into a tuple), which the adapter
then copied into a `Record` (the headers again, into a dict). On the planner's path, where a poll
is 500 readiness records, the second object cost about 2.5 µs of CPU a record in a run over the
broker (`bench.kafka_planner`, 10,000 clusters): one record in eight of the planner's whole cost.

`install()` has the fetcher make, for a consumer made with `value_deserializer=port_records` and
for no other, a subclass of its `PartitionRecords` that builds the `Record` straight from the
unpacked record. The subclass keeps everything else of the client's (the position it moves past
each record, control and aborted batches, CRC checks); a consumer made without the marker
(faust's, a benchmark's, a test's) gets the client's own class and its `ConsumerRecord`s.
Without `install` the marker is an identity deserializer, so a consumer still reads
`ConsumerRecord`s and the adapter converts them (`to_port_record`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import aiokafka.consumer.fetcher as _fetcher  # type: ignore[import-untyped]
from aiokafka import TopicPartition

from rollout_common.ports import Record

# aiokafka's own, as imported before `install` replaces it.
CLIENT_PARTITION_RECORDS: Any = _fetcher.PartitionRecords
# The position of `value_deserializer` among `PartitionRecords`' arguments.
_VALUE_DESERIALIZER = 5


def port_records(value: bytes | None) -> bytes | None:
    """The marker a consumer passes as its `value_deserializer` to be handed `Record`s; as a
    deserializer (where `install` did not run) it leaves the value as it is."""
    return value


def to_port_record(*, topic: str, partition: int, record: Any) -> Record:
    """The port's view of one record (aiokafka's unpacked record or its `ConsumerRecord`)."""
    return _port_record(TopicPartition(topic, partition), record)


class PortPartitionRecords(CLIENT_PARTITION_RECORDS):  # type: ignore[misc]
    """aiokafka's `PartitionRecords`, handing out the port's `Record`s."""

    def _consumer_record(self, tp: TopicPartition, record: Any) -> Record:
        return _port_record(tp, record)


# `Record` is a frozen dataclass: its `__init__` sets each field through `object.__setattr__`,
# 0.9 µs a record. Its slots' own setters do the same work in half that. They must cover every
# field, or a field would be left unset: checked here, when the module is loaded.
_FIELDS = ("topic", "partition", "offset", "key", "value", "headers", "timestamp_ms")
if tuple(f.name for f in dataclasses.fields(Record)) != _FIELDS:
    raise ImportError(f"rollout_common.ports.Record's fields are not {_FIELDS}: update kafka_port_records")
_new = object.__new__
_topic, _partition, _offset, _key, _value, _headers, _timestamp = (getattr(Record, name).__set__ for name in _FIELDS)


def _port_record(tp: TopicPartition, record: Any) -> Record:
    """Kafka allows null values (tombstones) and null header values; the port has bytes only, as
    anything published through it does, so a null from another producer reads as empty. The
    headers are a plain dict, made fresh for this record and shared with nobody: a read-only view
    cost about 1 µs a record on the planner's path."""
    headers = dict(record.headers)
    if not all(headers.values()):  # a null among them (an empty value is kept as it is)
        headers = {name: data or b"" for name, data in headers.items()}
    built = _new(Record)
    _topic(built, tp.topic)
    _partition(built, tp.partition)
    _offset(built, record.offset)
    _key(built, record.key)
    _value(built, record.value or b"")
    _headers(built, headers)
    _timestamp(built, record.timestamp)
    return built


def partition_records(*args: Any, **kwargs: Any) -> Any:
    """What the fetcher makes of one partition's fetched records: ours for a marked consumer, the
    client's own for any other, so that no other consumer pays a step per record. (aiokafka 0.14
    passes its eight arguments by position, the value deserializer sixth.)"""
    positional = args[_VALUE_DESERIALIZER] if len(args) > _VALUE_DESERIALIZER else None
    if kwargs.get("value_deserializer", positional) is port_records:
        return PortPartitionRecords(*args, **kwargs)
    return CLIENT_PARTITION_RECORDS(*args, **kwargs)


def install() -> None:
    """Let consumers of this process made with `value_deserializer=port_records` read `Record`s."""
    _fetcher.PartitionRecords = partition_records


__all__ = [
    "CLIENT_PARTITION_RECORDS",
    "PortPartitionRecords",
    "install",
    "partition_records",
    "port_records",
    "to_port_record",
]
