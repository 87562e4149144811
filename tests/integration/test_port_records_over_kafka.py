"""On a real broker: the bus's consumer reads the port's `Record`s built in aiokafka's fetcher
(`kafka_port_records`), with what a producer that is not ours may write (a tombstone, no key, a
null header value) read as BUS-4 says; a plain aiokafka consumer in the same process keeps the
client's `ConsumerRecord`s."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition  # type: ignore[import-untyped]

from rollout_adapters import kafka_consumer
from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.ports import Record, TopicSpec


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_the_bus_reads_records_built_in_the_fetcher_and_a_plain_consumer_its_own(
    kafka_bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def copied(**_: object) -> Record:
        raise AssertionError("the adapter copied a ConsumerRecord: the fetcher did not build the Record")

    # The adapter's copy is for a client the fetcher's records are not installed in: not here.
    monkeypatch.setattr(kafka_consumer, "to_port_record", copied)
    topic = f"{topic_prefix}.port-records"
    bus = KafkaBus(kafka_bootstrap, client_id="port-records")  # installs the fetcher's records
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    plain = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, enable_auto_commit=False)
    try:
        await bus.ensure_topics([TopicSpec(name=topic)])
        await producer.start()
        sent = [
            await producer.send_and_wait(topic, b'{"x":1}', key=b"a", headers=[("ce_id", b"1")], timestamp_ms=1000),
            await producer.send_and_wait(topic, None, key=b"b", timestamp_ms=1001),
            await producer.send_and_wait(topic, b"w", headers=[("ce_id", None), ("other", b"o")], timestamp_ms=1002),
        ]
        consumer = bus.consumer([topic], group=f"{topic_prefix}.port-records")
        records: list[Record] = []
        for _ in range(30):  # the group join takes a few polls
            records += await consumer.poll(max_records=10, timeout_s=1.0)
            if len(records) >= len(sent):
                break
        assert records == [
            Record(topic, 0, sent[0].offset, b"a", b'{"x":1}', {"ce_id": b"1"}, 1000),
            Record(topic, 0, sent[1].offset, b"b", b"", {}, 1001),
            Record(topic, 0, sent[2].offset, None, b"w", {"ce_id": b"", "other": b"o"}, 1002),
        ]

        await plain.start()
        plain.assign([TopicPartition(topic, 0)])
        await plain.seek_to_beginning(TopicPartition(topic, 0))
        theirs: list[ConsumerRecord[bytes, bytes]] = []
        while len(theirs) < len(sent):
            for batch in (await plain.getmany(timeout_ms=1000)).values():
                theirs += batch
        assert [type(r) for r in theirs] == [ConsumerRecord] * 3
        assert [(r.value, r.headers) for r in theirs] == [
            (b'{"x":1}', (("ce_id", b"1"),)),
            (None, ()),
            (b"w", (("ce_id", None), ("other", b"o"))),
        ]
    finally:
        await plain.stop()
        await producer.stop()
        await bus.close()
