"""Keeps the faust monitor worker running: faust 0.15 exits within a second when Kafka is down
at start-up, and its agents can die after broker outages, so the worker runs as a child
process that is restarted with back-off. SIGTERM/SIGINT are passed on to the child and end the
supervision.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Sequence

from rollout_adapters.connections import kafka_bus
from rollout_adapters.shutdown import stop_on_signals
from rollout_common.errors import PermanentError, RolloutError
from rollout_common.topics.catalog import DEAD_LETTER, HEARTBEATS, READINESS
from rollout_health.faust_topics import faust_topic_specs
from rollout_health.partition_check import partition_problem
from rollout_health.settings import MonitorSettings

log = logging.getLogger(__name__)

_FIRST_BACKOFF_S = 1.0
# A worker that ran this long was healthy: the next crash starts the back-off afresh.
_HEALTHY_RUN_S = 60.0
_STOP_GRACE_S = 20.0


class PartitionMismatchError(PermanentError):
    """The topics' partition counts are not the settings': restarting cannot help."""


async def broker_ready(settings: MonitorSettings, stop: asyncio.Event) -> bool:
    """Wait until the broker creates (or has) the monitor's topics and their partition counts agree
    with the settings, then create faust's own topics with the settings too; False if stopped first.
    A disagreement raises `PartitionMismatchError`.

    Without `create_topics` there is nothing to ask, and the restart back-off does the waiting.
    """
    delay = _FIRST_BACKOFF_S
    while settings.create_topics and not stop.is_set():
        bus = kafka_bus(settings, client_id=f"{settings.topic_prefix}rollout-health-supervisor")
        try:
            await bus.ensure_topics([settings.topic_spec(t) for t in (HEARTBEATS, READINESS, DEAD_LETTER)])
            problem = await partition_problem(bus, settings)
            if problem is not None:
                raise PartitionMismatchError(problem)
            # After the check: a changelog made here has the heartbeats' count, which is then known good.
            await bus.ensure_topics(faust_topic_specs(settings))
            return True
        except PartitionMismatchError:
            raise
        except RolloutError as exc:
            log.warning("monitor: Kafka not ready, retrying in %.0f s: %s", delay, exc)
        finally:
            await bus.close()
        await _sleep_unless(stop, delay)
        delay = min(delay * 2, settings.restart_backoff_max_s)
    return not stop.is_set()


async def supervise(settings: MonitorSettings, worker_argv: Sequence[str]) -> int:
    stop = stop_on_signals()
    backoff = _FIRST_BACKOFF_S
    while not stop.is_set():
        if not await broker_ready(settings, stop):
            break
        started = time.monotonic()
        child = await asyncio.create_subprocess_exec(sys.executable, "-m", "rollout_health", *worker_argv)
        log.info("monitor worker started (pid %d)", child.pid)
        exited = asyncio.create_task(child.wait())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if stop.is_set():
            await _stop_child(child, exited)
            break
        code = exited.result()
        if time.monotonic() - started > _HEALTHY_RUN_S:
            backoff = _FIRST_BACKOFF_S
        log.warning("monitor worker exited with %s; restarting in %.0f s", code, backoff)
        await _sleep_unless(stop, backoff)
        backoff = min(backoff * 2, settings.restart_backoff_max_s)
    return 0


async def _stop_child(child: asyncio.subprocess.Process, exited: asyncio.Task[int]) -> None:
    if child.returncode is None:
        child.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(exited), _STOP_GRACE_S)
    except TimeoutError:
        log.warning("monitor worker ignored SIGTERM for %.0f s; killing it", _STOP_GRACE_S)
        child.kill()
        await exited
    log.info("monitor worker stopped (exit code %s)", child.returncode)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return
