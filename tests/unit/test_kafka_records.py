"""The lenient record reader (BUS-4): a batch whose record has a header name that is not UTF-8
is read whole, records before and after it included, instead of raising out of the fetcher."""

from __future__ import annotations

import struct
from typing import Any

import aiokafka.consumer.fetcher as fetcher  # type: ignore[import-untyped]
import pytest
from aiokafka import codec
from aiokafka.record.default_records import (  # type: ignore[import-untyped]
    DefaultRecordBase,
    DefaultRecordBatchBuilder,
)
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder  # type: ignore[import-untyped]

from rollout_adapters.kafka_records import CLIENT_READER, LenientMemoryRecords, install

PLACEHOLDER = "\x01\x02"


def _batch(base_offset: int, names: list[str]) -> bytes:
    """One v2 batch, a record per name (header `name: b"v"`), with PLACEHOLDER turned into
    the bytes ff fe, which no Kafka client writes from text."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, name in enumerate(names):
        builder.append(i, timestamp=1000 + i, key=f"k{i}".encode(), value=b"{}", headers=[(name, b"v")])
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data).replace(PLACEHOLDER.encode(), b"\xff\xfe")


def _read(records: Any) -> list[tuple[int, int, bytes, list[tuple[str, bytes]]]]:
    out = []
    while records.has_next():
        for record in records.next_batch():
            out.append((record.offset, record.timestamp, record.key, list(record.headers)))
    return out


def test_the_clients_reader_raises_on_such_a_name() -> None:
    """What the lenient reader is for: aiokafka's own reader stops at the record."""
    with pytest.raises(UnicodeDecodeError):
        _read(CLIENT_READER(_batch(0, ["a", PLACEHOLDER, "c"])))


def test_every_record_of_the_batch_and_the_next_is_read_in_order() -> None:
    data = _batch(10, ["a", PLACEHOLDER, "c"]) + _batch(13, ["d"])
    assert _read(LenientMemoryRecords(data)) == [
        (10, 1000, b"k0", [("a", b"v")]),
        (11, 1001, b"k1", [("\udcff\udcfe", b"v")]),
        (12, 1002, b"k2", [("c", b"v")]),
        (13, 1000, b"k0", [("d", b"v")]),
    ]


def test_install_replaces_the_fetchers_reader() -> None:
    install()
    assert fetcher.MemoryRecords is LenientMemoryRecords


def _gzipped(batch: bytes) -> bytes:
    """The same batch with its records gzip-compressed (attributes codec 1); the CRC is left as it
    was, which neither reader checks (the fetcher does, before)."""
    header = DefaultRecordBase.HEADER_STRUCT.size
    body = codec.gzip_encode(batch[header:])
    data = bytearray(batch[:header] + body)
    attributes = struct.unpack_from(">h", data, 21)[0]
    struct.pack_into(">h", data, 21, attributes | 1)
    struct.pack_into(">i", data, 8, len(data) - 12)
    return bytes(data)


def test_a_compressed_batch_is_read_again_from_its_decompressed_records() -> None:
    data = _gzipped(_batch(0, ["a", PLACEHOLDER, "c"]))
    with pytest.raises(UnicodeDecodeError):
        _read(CLIENT_READER(data))
    assert [(offset, headers) for offset, _, _, headers in _read(LenientMemoryRecords(data))] == [
        (0, [("a", b"v")]),
        (1, [("\udcff\udcfe", b"v")]),
        (2, [("c", b"v")]),
    ]


def test_a_legacy_batch_is_the_clients_own() -> None:
    """Message format v0/v1 carries no headers: its batches are read by the client alone."""
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1000, key=b"k", value=b"v")
    assert _read(LenientMemoryRecords(bytes(builder.build()))) == [(0, 1000, b"k", [])]
