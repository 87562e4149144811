"""A record reader for aiokafka that reads on past a header name that is not UTF-8 (BUS-4).

aiokafka (0.14) decodes header names as UTF-8 while it unpacks a fetched batch, inside its
fetcher, before any consumer sees a record. One record whose header name is not UTF-8 (Kafka's
protocol says it must be, but nothing checks: kcat or any client writing bytes can send one)
then raises `UnicodeDecodeError` out of every poll, and:

- nothing of that partition past the consumer's position is ever delivered again: the records
  unpacked before it in the same fetch are dropped with the exception, fetched again and dropped
  again, and the position never moves;
- records of other partitions that the same poll had already drained are lost too: their
  positions were advanced before the exception threw the drained records away.

`install()` wraps the fetcher's `MemoryRecords` so that a batch whose fast (compiled) reader
raises `UnicodeDecodeError` is read again, whole, from its raw bytes, with header names decoded
with `surrogateescape`. The bad record is then delivered like any other,
its header name holding lone surrogates (U+DC80..U+DCFF for the undecodable bytes): the envelope
decoder refuses it, so every consumer dead-letters it and commits past it, as any bad record.
Batches that read cleanly (all of them, in practice) take the compiled reader's path unchanged.

It patches a module attribute of aiokafka, so it applies to every consumer of the process,
faust's included (the health monitor's worker uses aiokafka's fetcher too).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import aiokafka.consumer.fetcher as _fetcher  # type: ignore[import-untyped]
from aiokafka import codec
from aiokafka.errors import CorruptRecordException  # type: ignore[import-untyped]
from aiokafka.record.default_records import DefaultRecord, DefaultRecordBase  # type: ignore[import-untyped]
from aiokafka.record.util import decode_varint  # type: ignore[import-untyped]

# aiokafka's own reader, as imported before `install` replaces it.
CLIENT_READER: Any = _fetcher.MemoryRecords
# A batch on the wire: base offset (int64) and length (int32) of what follows.
_LOG_OVERHEAD = struct.calcsize(">qi")
_HEADER = DefaultRecordBase.HEADER_STRUCT
# base offset (int64), length (int32), partition leader epoch (int32), then the magic byte
_MAGIC_OFFSET = struct.calcsize(">qii")
_DECOMPRESS: dict[int, Callable[[bytes], bytes]] = {
    1: codec.gzip_decode,
    2: codec.snappy_decode,
    3: codec.lz4_decode,
    4: codec.zstd_decode,
}
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08


def install() -> None:
    """Make every aiokafka consumer of this process read past a header name that is not UTF-8."""
    _fetcher.MemoryRecords = LenientMemoryRecords


class LenientMemoryRecords:
    """aiokafka's `MemoryRecords`, whose batches fall back to `lenient_records` when needed."""

    def __init__(self, data: bytes) -> None:
        self._inner = CLIENT_READER(data)
        self._data = memoryview(data)
        self._pos = 0

    def size_in_bytes(self) -> int:
        return int(self._inner.size_in_bytes())

    def has_next(self) -> bool:
        return bool(self._inner.has_next())

    def next_batch(self) -> Any:
        batch = self._inner.next_batch()
        if batch is None:
            return None
        # The inner reader hands out whole batches in order; follow it to know this one's bytes.
        (length,) = struct.unpack_from(">i", self._data, self._pos + 8)
        end = self._pos + _LOG_OVERHEAD + length
        raw, self._pos = self._data[self._pos : end], end
        if raw[_MAGIC_OFFSET] < 2:  # v0/v1 records have no headers (and their batches no `magic`)
            return batch
        return _LenientBatch(batch, raw)


class _LenientBatch:
    """One record batch (format v2): all of its records read by the compiled reader, or, when that
    raises on a header name, all of them read again from the batch's bytes by `lenient_records`."""

    def __init__(self, batch: Any, raw: memoryview) -> None:
        self._batch = batch
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._batch, name)

    def __iter__(self) -> Iterator[Any]:
        # The whole batch in one call into the compiled reader (a Python `__next__` per record
        # cost about 0.1 µs a record). The batch is in memory already, so nothing is read
        # sooner than the fetcher would read it.
        try:
            return iter(list(self._batch))
        except UnicodeDecodeError:
            return lenient_records(bytes(self._raw))


def lenient_records(raw: bytes) -> Iterator[Any]:
    """The records of one v2 batch (`raw` from its base offset on), header names decoded with
    `surrogateescape`. Kafka's record format: varint length, int8 attributes, varlong timestamp
    delta, varint offset delta, key and value as varint length + bytes (-1: null), then a varint
    header count and per header a varint name length + name, varint value length + value."""
    fields = _HEADER.unpack_from(raw)
    base_offset, attributes, first_timestamp, max_timestamp, count = (
        fields[0],
        fields[5],
        fields[7],
        fields[8],
        fields[12],
    )
    buffer = bytearray(_decompressed(raw[_HEADER.size :], attributes & _CODEC_MASK))
    timestamp_type = 1 if attributes & _LOG_APPEND_TIME else 0
    pos = 0
    for _ in range(count):
        length, pos = decode_varint(buffer, pos)
        end = pos + length
        pos += 1  # record attributes (int8): unused by the format so far
        timestamp_delta, pos = decode_varint(buffer, pos)
        offset_delta, pos = decode_varint(buffer, pos)
        key, pos = _nullable_bytes(buffer, pos)
        value, pos = _nullable_bytes(buffer, pos)
        headers, pos = _lenient_headers(buffer, pos)
        if pos != end:
            raise CorruptRecordException(f"record at offset {base_offset + offset_delta}: length {length} is wrong")
        timestamp = max_timestamp if timestamp_type else first_timestamp + timestamp_delta
        yield DefaultRecord(base_offset + offset_delta, timestamp, timestamp_type, key, value, headers)


def _decompressed(body: bytes, compression: int) -> bytes:
    if not compression:
        return body
    decompress = _DECOMPRESS.get(compression)
    if decompress is None:
        raise CorruptRecordException(f"unknown compression codec {compression}")
    return decompress(body)


def _lenient_headers(buffer: bytearray, pos: int) -> tuple[list[tuple[str, bytes | None]], int]:
    """A record's headers from `pos`, names decoded with `surrogateescape`; and the position after them."""
    count, pos = decode_varint(buffer, pos)
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name, pos = _nullable_bytes(buffer, pos)
        data, pos = _nullable_bytes(buffer, pos)
        headers.append(((name or b"").decode("utf-8", "surrogateescape"), data))
    return headers, pos


def _nullable_bytes(buffer: bytearray, pos: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(buffer, pos)
    if size < 0:
        return None, pos
    return bytes(buffer[pos : pos + size]), pos + size


__all__ = ["CLIENT_READER", "LenientMemoryRecords", "install", "lenient_records"]
