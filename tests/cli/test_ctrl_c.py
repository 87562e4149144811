"""Ctrl-C ends `rollout watch` with exit 0 and nothing on stderr, whenever it comes: while the
modules load, while the consumer starts and joins, while it polls, and with the broker frozen
(SIGSTOP) so that nothing it sends is answered.

Each run is the real `rollout` program signalled at a chosen moment after its `main` began (seen
from outside: SIGINT blocked in /proc/PID/status), so the race between the signal and each step
of the start-up is run, not imagined. A Ctrl-C used to print a traceback in the first second, and
the exit waited 40 s for the broker's answer to leaving the group when it was frozen.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from local_servers import frozen

from rollout_adapters.kafka_bus import KafkaBus
from rollout_cli.ctrl_c import GRACE_S, LEFTOVER_S
from rollout_common import envelope
from rollout_common.commands import Notice
from rollout_common.topics import ALL
from rollout_common.topics.catalog import PROGRESS
from rollout_devenv import KafkaBroker

ROLLOUT = Path(sys.executable).parent / "rollout"
# Past the start-up, the command ends within GRACE_S + LEFTOVER_S of the Ctrl-C; a Ctrl-C that comes
# while the modules load takes effect once they have loaded, which a loaded machine makes slow.
EXIT_BOUND_S = GRACE_S + LEFTOVER_S + 8.0
POINTS = 16  # signalled start-ups, evenly spread from `main`'s first line to the joined consumer
_STARTED_S = 60.0
_JOINED_S = 120.0


def _sigint_blocked(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    blocked = next(line for line in status.splitlines() if line.startswith("SigBlk:"))
    return bool(int(blocked.split()[1], 16) & (1 << (signal.SIGINT - 1)))


@dataclass
class Watch:
    process: subprocess.Popen[str]
    began: float  # monotonic time at which its `main` began

    def ctrl_c(self) -> tuple[int, str, float]:
        """SIGINT now; the exit code, stderr and seconds from the signal to the exit."""
        signalled = time.monotonic()
        self.process.send_signal(signal.SIGINT)
        try:
            _, err = self.process.communicate(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
            pytest.fail(f"rollout still ran {EXIT_BOUND_S:g} s after Ctrl-C; stderr: {err}")
        return self.process.returncode, err, time.monotonic() - signalled


@contextmanager
def _watch(bootstrap: str, prefix: str) -> Iterator[Watch]:
    with _started(["watch", "--plain", "--bootstrap", bootstrap, "--topic-prefix", prefix]) as watch:
        yield watch


@contextmanager
def _started(argv: list[str]) -> Iterator[Watch]:
    """`rollout ARGV` once its `main` has begun."""
    process = subprocess.Popen([str(ROLLOUT), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + _STARTED_S
        while not _sigint_blocked(process.pid):
            assert process.poll() is None and time.monotonic() < deadline, f"rollout {argv[0]} never reached main"
        yield Watch(process, time.monotonic())
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _ctrl_c_at(watch: Watch, after_s: float) -> tuple[int, str, float]:
    # Sleeping here places the signal at a chosen moment of the start-up; it waits for nothing.
    time.sleep(max(0.0, watch.began + after_s - time.monotonic()))
    return watch.ctrl_c()


async def _topics(bootstrap: str, prefix: str) -> None:
    bus = KafkaBus(bootstrap, client_id=f"{prefix}test")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])
    finally:
        await bus.close()


async def _joined(bootstrap: str, prefix: str, watch: Watch) -> float:
    """Publish a notice every 0.2 s until the watch prints one: it has joined its group and reads
    from the topic's end. Returns when that was, in seconds after its `main` began."""
    assert watch.process.stdout is not None
    os.set_blocking(watch.process.stdout.fileno(), False)
    notice = Notice(code="SEQ-6", message="cluster c-1 joined canary", cluster="c-1", stage="canary")
    value, headers = envelope.encode(notice, event_id="n-1", source="test", at=time.time())
    bus = KafkaBus(bootstrap, client_id=f"{prefix}test")
    try:
        async with asyncio.timeout(_JOINED_S):
            while not watch.process.stdout.readline():
                assert watch.process.poll() is None, watch.process.communicate()
                await bus.publish(prefix + PROGRESS.name, key=b"c-1", value=value, headers=headers)
                await asyncio.sleep(0.2)
    finally:
        await bus.close()
    return time.monotonic() - watch.began


def _assert_clean(outcome: tuple[int, str, float], *, at: str) -> None:
    code, err, took = outcome
    assert (code, err) == (0, ""), f"Ctrl-C {at}: exit {code}, stderr {err!r}"
    assert took < EXIT_BOUND_S, f"Ctrl-C {at}: exited {took:.1f} s later"


@pytest.mark.integration
def test_ctrl_c_at_any_point_of_the_start_up_exits_0_without_a_traceback(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    prefix = topic_prefix + "."
    asyncio.run(_topics(kafka_bootstrap, prefix))
    with _watch(kafka_bootstrap, prefix) as watch:
        joined = asyncio.run(_joined(kafka_bootstrap, prefix, watch))
        _assert_clean(watch.ctrl_c(), at="while polling")
    for point in range(POINTS):
        after = joined * point / (POINTS - 1)
        with _watch(kafka_bootstrap, prefix) as watch:
            _assert_clean(_ctrl_c_at(watch, after), at=f"{after:.2f} s after main began (joined at {joined:.2f} s)")


@pytest.mark.integration
def test_ctrl_c_with_the_broker_frozen_exits_0_within_the_grace(
    kafka_broker: KafkaBroker, kafka_bootstrap: str, topic_prefix: str
) -> None:
    """Frozen while the watch polls (its leave request is never answered), and frozen before it
    starts (its first request is never answered), at several points of its start-up."""
    prefix = topic_prefix + "."
    asyncio.run(_topics(kafka_bootstrap, prefix))
    with _watch(kafka_bootstrap, prefix) as watch:
        joined = asyncio.run(_joined(kafka_bootstrap, prefix, watch))
        with frozen(kafka_broker):
            _assert_clean(watch.ctrl_c(), at="while polling a frozen broker")
    for after in (0.0, joined / 3, 2 * joined / 3, joined, 1.5 * joined):
        with frozen(kafka_broker), _watch(kafka_bootstrap, prefix) as watch:
            _assert_clean(_ctrl_c_at(watch, after), at=f"{after:.2f} s after main began, broker frozen")


def test_ctrl_c_stops_the_demo_at_any_point_with_130_and_no_traceback() -> None:
    """The same for `rollout demo` (a plain command: Ctrl-C is KeyboardInterrupt there): while it
    loads, while it builds its fleet and while it runs, it exits 130 (interrupted) without a traceback."""
    argv = ["demo", "--no-live", "--no-dashboard", "--speed", "1"]
    with _started(argv) as demo:
        assert demo.process.stdout is not None
        assert demo.process.stdout.readline(), demo.process.communicate()
        running = time.monotonic() - demo.began  # when it printed its first line
        code, err, _ = demo.ctrl_c()
        assert (code, err) == (130, ""), err
    for point in range(6):
        after = running * point / 5
        with _started(argv) as demo:
            code, err, took = _ctrl_c_at(demo, after)
            assert (code, err) == (130, ""), f"Ctrl-C {after:.2f} s after main began: exit {code}, stderr {err!r}"
            assert took < EXIT_BOUND_S
