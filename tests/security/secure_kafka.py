"""A secured broker shared by the security tests, and clients that log in as one principal."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acl_table import PRINCIPALS, acls
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from topic_reader import Message, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common.topics import ALL
from rollout_devenv import KafkaBroker
from rollout_devenv.acls import create_acls

SUPER_USER = "admin"
# the one Redis user of the secured Redis the security tests run against
REDIS_USER = "rollout"


def new_passwords() -> dict[str, str]:
    """A fresh random password per principal and session: nothing to leak from the repository."""
    return {name: f"pw-{secrets.token_hex(12)}" for name in (SUPER_USER, *PRINCIPALS)}


@dataclass(frozen=True)
class SecureKafka:
    broker: KafkaBroker
    prefix: str

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def login(self, user: str = SUPER_USER) -> dict[str, Any]:
        return self.broker.client_settings(user)

    def password(self, user: str) -> str:
        return self.broker.sasl_users[user]

    def topic(self, name: str) -> str:
        return self.prefix + name

    def bus(self, user: str) -> KafkaBus:
        return KafkaBus(self.bootstrap, client_id=f"{self.prefix}{user}", security=self.login(user))

    async def produce(self, user: str, topic: str, *, key: bytes, value: bytes, headers: dict[str, bytes]) -> None:
        """One record as `user`, with a plain producer; the broker's refusal is raised as aiokafka's error.

        Not idempotent: a principal with WRITE on no topic at all cannot get a producer id, and
        aiokafka 0.14 then leaks the sender's connection; a plain producer meets the per-topic check.
        """
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", **self.login(user))
        await producer.start()
        try:
            await producer.send_and_wait(self.topic(topic), value, key=key, headers=list(headers.items()))
        finally:
            await producer.stop()

    async def read(
        self, topic: str, *, until: Callable[[list[Message]], bool], user: str = SUPER_USER, timeout_s: float = 30.0
    ) -> list[Message]:
        """Every record of the topic from the beginning (as `user`) until `until(records)` holds."""
        return await read_topic(
            self.bootstrap, self.topic(topic), until=until, timeout_s=timeout_s, client=self.login(user)
        )

    async def read_all(self, topic: str, *, settle_s: float = 1.0) -> list[Message]:
        """What the topic holds now: read until nothing new came for `settle_s`."""
        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, **self.login())
        await consumer.start()
        try:
            count = next(t.partitions for t in ALL if t.name == topic)
            partitions = [TopicPartition(self.topic(topic), p) for p in range(count)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            records: list[Message] = []
            while batches := await consumer.getmany(timeout_ms=int(settle_s * 1000)):
                for batch in batches.values():
                    records.extend(batch)
            return records
        finally:
            await consumer.stop()


async def prepare(broker: KafkaBroker, prefix: str) -> SecureKafka:
    """The catalog's topics (created by the super user, as a deployment's administrator would) and
    the least-privilege ACLs, all under `prefix`."""
    admin = KafkaBus(broker.bootstrap, client_id=f"{prefix}admin", security=broker.client_settings())
    try:
        await admin.ensure_topics([t.spec(prefix) for t in ALL])
    finally:
        await admin.close()
    await create_acls(broker.bootstrap, broker.client_settings(), acls(prefix))
    return SecureKafka(broker=broker, prefix=prefix)
