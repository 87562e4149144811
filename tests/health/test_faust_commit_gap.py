"""BUS-4: a faust worker that skipped records reads them again and goes on committing.

faust hands a partition's records to its agent and commits up to the first offset not yet
acknowledged. When a race between its rebalance seek and its fetches skips records (see
`rollout_adapters.faust_commit_gap`), nothing acknowledges them: faust commits nothing on that
partition again, and the skipped heartbeats are never judged. In the sustained health run this
left two of four heartbeat partitions committed at offset 2 for good. `commit_gap_worker.py` puts
a real worker on the real broker in that state.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

WORKER = Path(__file__).with_name("commit_gap_worker.py")
SKIP_AT, SKIP_TO, RECORDS = 9, 25, 40


class GapWorker:
    def __init__(self, kafka_bootstrap: str, topic: str, data_dir: Path) -> None:
        self.bootstrap, self.topic, self.group, self.data_dir = kafka_bootstrap, topic, f"{topic}-group", data_dir
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        args = [self.bootstrap, self.topic, self.group, str(self.data_dir), str(SKIP_AT), str(SKIP_TO)]
        self.process = subprocess.Popen([sys.executable, str(WORKER), *args], start_new_session=True)

    def handled(self) -> list[int]:
        path = self.data_dir / "handled"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    async def committed(self, admin: AIOKafkaAdminClient) -> int:
        offsets = await admin.list_consumer_group_offsets(self.group)
        return max((meta.offset for tp, meta in offsets.items() if tp.topic == self.topic), default=-1)


@pytest.fixture
def worker(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> Iterator[GapWorker]:
    gap_worker = GapWorker(kafka_bootstrap, f"{topic_prefix}.commit-gap", tmp_path)
    yield gap_worker
    if gap_worker.process is not None:
        gap_worker.process.terminate()
        try:
            gap_worker.process.wait(30)
        except subprocess.TimeoutExpired:
            gap_worker.process.kill()
            gap_worker.process.wait()


async def _run(worker: GapWorker) -> AIOKafkaAdminClient:
    """The topic with RECORDS records, and the worker reading it; returns a started admin client."""
    admin = AIOKafkaAdminClient(bootstrap_servers=worker.bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(worker.topic, num_partitions=1, replication_factor=1)])
    producer = AIOKafkaProducer(bootstrap_servers=worker.bootstrap)
    await producer.start()
    try:
        for offset in range(RECORDS):
            await producer.send_and_wait(worker.topic, f"record-{offset}".encode())
    finally:
        await producer.stop()
    worker.start()
    return admin


async def test_the_skipped_records_are_read_again_and_the_partition_committed_to_its_end(worker: GapWorker) -> None:
    """Without `faust_commit_gap` the group stays committed at SKIP_AT + 1 and offsets SKIP_AT + 1 to
    SKIP_TO - 1 are never handled: this test then fails waiting for the commit."""
    admin = await _run(worker)
    try:
        await _until_committed(admin, worker, RECORDS)
    finally:
        await admin.close()
    assert sorted(set(worker.handled())) == list(range(RECORDS))


async def _until_committed(admin: AIOKafkaAdminClient, worker: GapWorker, offset: int) -> None:
    committed = -1
    try:
        async with asyncio.timeout(60):
            while (committed := await worker.committed(admin)) < offset:
                assert worker.process is not None and worker.process.poll() is None, "the worker exited"
                await asyncio.sleep(0.2)
    except TimeoutError:
        handled = sorted(set(worker.handled()))
        raise AssertionError(f"committed {committed}, not {offset}, in 60 s; offsets handled: {handled}") from None
