"""Our consumers' records are built as the port's `Record` inside aiokafka's fetcher, one object a
record instead of a `ConsumerRecord` and then a `Record`; every other consumer keeps the client's
own records (`rollout_adapters/kafka_port_records.py`)."""

from __future__ import annotations

from typing import Any

import aiokafka.consumer.fetcher as fetcher  # type: ignore[import-untyped]
from aiokafka import ConsumerRecord, TopicPartition  # type: ignore[import-untyped]
from aiokafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]
from aiokafka.record.memory_records import MemoryRecords  # type: ignore[import-untyped]

from rollout_adapters.kafka_port_records import (
    CLIENT_PARTITION_RECORDS,
    PortPartitionRecords,
    install,
    partition_records,
    port_records,
    to_port_record,
)
from rollout_adapters.kafka_records import LenientMemoryRecords
from rollout_common.ports import Record

TP = TopicPartition("rollout.readiness", 3)


def _builder() -> Any:
    """An empty v2 batch, uncompressed, outside any transaction."""
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )


def _batch() -> bytes:
    """Offsets 10 to 13: a plain record, a tombstone, a record without a key and one whose header
    value is null and another empty (as a producer that is not ours may write)."""
    builder = _builder()
    builder.append(0, timestamp=1000, key=b"a", value=b'{"x":1}', headers=[("ce_id", b"1")])
    builder.append(1, timestamp=1001, key=b"b", value=None, headers=[])
    builder.append(2, timestamp=1002, key=None, value=b"v", headers=[("ce_id", b"3"), ("ce_type", b"t")])
    builder.append(3, timestamp=1003, key=b"d", value=b"w", headers=[("ce_id", None), ("other", b"o"), ("empty", b"")])
    data = bytearray(builder.build())
    data[0:8] = (10).to_bytes(8, "big")
    return bytes(data)


def _made(*, value_deserializer: Any, fetch_offset: int = 10) -> Any:
    # aiokafka 0.14's arguments, in its order: the fetcher passes them so
    return partition_records(TP, MemoryRecords(_batch()), [], fetch_offset, None, value_deserializer, False, 0)


EXPECTED = [
    Record("rollout.readiness", 3, 10, b"a", b'{"x":1}', {"ce_id": b"1"}, 1000),
    Record("rollout.readiness", 3, 11, b"b", b"", {}, 1001),
    Record("rollout.readiness", 3, 12, None, b"v", {"ce_id": b"3", "ce_type": b"t"}, 1002),
    Record("rollout.readiness", 3, 13, b"d", b"w", {"ce_id": b"", "other": b"o", "empty": b""}, 1003),
]


def test_a_marked_consumers_records_are_the_ports_records_with_every_field() -> None:
    """BUS-4's null values read as empty bytes, as they did through the copy."""
    made = _made(value_deserializer=port_records)
    assert type(made) is PortPartitionRecords
    assert list(made) == EXPECTED  # a dataclass equals only its own class: these are `Record`s
    assert made.next_fetch_offset == 14  # the fetcher's position moves past them as before


def test_records_before_the_fetch_offset_are_skipped_as_the_client_skips_them() -> None:
    made = _made(value_deserializer=port_records, fetch_offset=12)
    assert [r.offset for r in made] == [12, 13]
    assert made.next_fetch_offset == 14


def test_any_other_consumer_gets_the_clients_own_records() -> None:
    """faust's consumer, a benchmark's raw one: the client's class, no step of ours per record."""
    made = _made(value_deserializer=None)
    assert type(made) is CLIENT_PARTITION_RECORDS
    records = list(made)
    assert [type(r) for r in records] == [ConsumerRecord] * 4
    assert records[3].headers == (("ce_id", None), ("other", b"o"), ("empty", b""))
    assert records[1].value is None


def test_by_keyword_the_marker_is_found_too() -> None:
    made = partition_records(
        TP,
        MemoryRecords(_batch()),
        [],
        10,
        key_deserializer=None,
        value_deserializer=port_records,
        check_crcs=False,
        isolation_level=0,
    )
    assert list(made) == EXPECTED


def test_without_install_the_adapter_copies_the_clients_records_into_the_same_records() -> None:
    """The marker is an identity deserializer, and the copy gives what the fetcher would build."""
    made = CLIENT_PARTITION_RECORDS(TP, MemoryRecords(_batch()), [], 10, None, port_records, False, 0)
    copies = [to_port_record(topic=m.topic, partition=m.partition, record=m) for m in made]
    assert copies == EXPECTED
    assert port_records(b"v") == b"v"
    assert port_records(None) is None


def test_install_has_the_fetcher_make_its_partition_records_through_ours() -> None:
    install()
    assert fetcher.PartitionRecords is partition_records


def test_a_header_name_that_is_not_utf8_reaches_the_record_through_the_lenient_reader() -> None:
    """BUS-4: the lenient reader reads such a batch again from its bytes (kafka_records); its records
    become the port's `Record`s like any other, the bad name holding lone surrogates for the
    envelope decoder to refuse."""
    builder = _builder()
    builder.append(0, timestamp=1000, key=b"a", value=b"{}", headers=[("ce_id", b"1")])
    builder.append(1, timestamp=1001, key=b"b", value=b"{}", headers=[("\x01\x02", b"v")])
    data = bytes(builder.build()).replace(b"\x01\x02", b"\xff\xfe")
    made = partition_records(TP, LenientMemoryRecords(data), [], 0, None, port_records, False, 0)
    assert list(made) == [
        Record("rollout.readiness", 3, 0, b"a", b"{}", {"ce_id": b"1"}, 1000),
        Record("rollout.readiness", 3, 1, b"b", b"{}", {"\udcff\udcfe": b"v"}, 1001),
    ]
