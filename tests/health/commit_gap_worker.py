"""A faust worker that skips records as the health monitor's workers skipped them in the sustained run.

    python commit_gap_worker.py BOOTSTRAP TOPIC GROUP DATA_DIR SKIP_AT SKIP_TO

It reads TOPIC (one partition) and appends each record's offset to DATA_DIR/handled, one a line.
The first time its consumer fetches the records after SKIP_AT it drops them up to SKIP_TO and
forgets its read offset, as faust does after a seek to a partition it finds without a committed
offset: faust hands the agent SKIP_TO next, records no gap, and waits for acknowledgements of the
offsets between that never come, unless `rollout_adapters.faust_commit_gap` reads them again.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import faust
from faust.transport.consumer import Consumer

from rollout_adapters import faust_commit_gap


def main(argv: list[str]) -> None:
    bootstrap, topic, group, data_dir, skip_at, skip_to = argv[:6]
    faust_commit_gap.install()
    _skip_once(int(skip_at), int(skip_to))
    handled = Path(data_dir) / "handled"
    app = faust.App(
        group,
        broker=f"kafka://{bootstrap}",
        store="memory://",
        datadir=data_dir,
        web_enabled=False,
        autodiscover=False,
        topic_partitions=1,
        broker_commit_interval=0.5,
        consumer_auto_offset_reset="earliest",
    )
    source = app.topic(topic, value_serializer="raw", key_serializer="raw", partitions=1)

    async def agent(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            message = event.message
            with handled.open("a") as out:
                out.write(f"{message.offset}\n")
            yield None

    app.agent(source, name="reader")(agent)
    worker = faust.Worker(app, loglevel="WARNING", quiet=True, override_logging=False)
    worker.execute_from_commandline()


def _skip_once(skip_at: int, skip_to: int) -> None:
    """Wrap faust's consumer so that its first fetch past `skip_at` loses the records before `skip_to`."""
    fetch = Consumer.getmany
    skipped = False

    async def getmany(self: Any, timeout: float) -> AsyncIterator[tuple[Any, Any]]:  # noqa: ASYNC109 (faust's)
        nonlocal skipped
        async for tp, message in fetch(self, timeout):
            if not skipped and skip_at < message.offset < skip_to:
                continue
            if not skipped and message.offset == skip_to:
                skipped = True
                self._read_offset[tp] = None
            yield tp, message

    Consumer.getmany = getmany  # type: ignore[method-assign]


if __name__ == "__main__":
    main(sys.argv[1:])
