"""The check runner (CHK-2): evaluates the check series the planner announces and publishes every result.

It reads the planner's `check_series` events on the progress topic (from its beginning, without a
consumer group: a restarted runner learns every series still running), evaluates each running
series on its grid (`series`), asks Prometheus through `InstantQuery` and publishes one
`check_result` per evaluation on `rollout.check-results`. The checks' queries and conditions come
from the sequence the planner runs, as `rollout apply` stored it in the planner's Redis namespace;
it is read again for every round of evaluations, so an applied change counts from its next round.

A plain asyncio task in a process of its own (`python -m rollout_health checks`), not an agent of
the monitor's faust app: its work is timers and HTTP requests, not a stream of records to share
out. Every monitor worker would run a faust timer, so several workers would evaluate each check
several times, and each extra failed result would count against the check's `failureLimit`; the
runner is therefore run once per fleet, as the inventory watcher is. Nothing in it blocks the
heartbeat agent either: a Prometheus that does not answer holds only its own round, for at most
the query timeout (all due checks are asked at once).

Nothing Prometheus, Redis or Kafka does stops it: an unreachable Prometheus or an unreadable
sequence is an `inconclusive` result with the reason, and a result Kafka does not take is
logged, counted and followed by the next evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from pydantic import ValidationError

from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.checks import Check
from rollout_common.commands import CheckSeries
from rollout_common.envelope import decode, encode
from rollout_common.errors import InvalidInputError, RolloutError, TransientError
from rollout_common.ports import Bus, Consumer, Record, Store
from rollout_common.sequence import Sequence
from rollout_common.topics.catalog import CHECK_RESULTS, PROGRESS
from rollout_health.checks.evaluator import evaluate_check, prometheus_base_url
from rollout_health.checks.port import InstantQuery
from rollout_health.checks.series import RunningSeries, SeriesKey, announced, due, next_due_at
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import CheckRunnerSettings

log = logging.getLogger(__name__)

SOURCE = "rollout-health/checks"
# Where `rollout apply` stores the sequence for the planner, in the planner's namespace.
SEQUENCE_KEY = "sequence"
# A broker that refuses a read is asked again after this, not in a tight loop.
RETRY_S = 1.0


class CheckRunner:
    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        query: InstantQuery,
        settings: CheckRunnerSettings,
        metrics: HealthMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bus = bus
        self._store = store
        self._query = query
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._book: dict[SeriesKey, RunningSeries] = {}
        self.ready = False

    @property
    def running(self) -> dict[SeriesKey, RunningSeries]:
        return dict(self._book)

    async def run(self, stop: asyncio.Event) -> None:
        topic = self._settings.topic_prefix + PROGRESS.name
        consumer = self._bus.consumer([topic], group=None, from_beginning=True)
        try:
            while not stop.is_set():
                self.take(await self._poll(consumer, stop))
                self.ready = True
                await self.evaluate_due()
        finally:
            await consumer.close()

    async def _poll(self, consumer: Consumer, stop: asyncio.Event) -> list[Record]:
        wait = self._settings.idle_poll_s
        due_at = next_due_at(self._book)
        if due_at is not None:
            wait = min(wait, max(0.0, due_at - self._clock()))
        try:
            return await consumer.poll(timeout_s=wait)
        except TransientError as exc:
            log.warning("cannot read the planner's check series; retrying in %g s: %s", RETRY_S, exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RETRY_S)
            return []

    def take(self, records: list[Record]) -> None:
        """Apply the `check_series` events among the progress topic's records; the rest is not ours."""
        for record in records:
            try:
                _, event = decode(record.value, record.headers, PROGRESS.models)
            except InvalidInputError:
                continue  # the planner's consumers judge its output; nothing here to evaluate
            if isinstance(event, CheckSeries):
                self._announce(event)

    def _announce(self, event: CheckSeries) -> None:
        key = SeriesKey(event.rollout_id, event.stage, event.check)
        self._book = announced(self._book, key, running=event.running, since=event.since, interval=event.interval)
        log.info(
            "check %s of %s at %s: series %s",
            key.check,
            key.rollout_id,
            key.stage,
            "running" if key in self._book else "ended",
            extra={"rollout": key.rollout_id, "stage": key.stage, "check": key.check, "since": event.since},
        )

    async def evaluate_due(self) -> list[CheckResult]:
        """Every series due now, asked at once; each result published, each series moved on its grid."""
        keys = due(self._book, now=self._clock())
        if not keys:
            return []
        sequence, problem = await self._sequence()
        results = await asyncio.gather(*(self._evaluate(key, sequence, problem) for key in keys))
        for key, result in zip(keys, results, strict=True):
            series = self._book.get(key)
            if series is not None:
                self._book[key] = series.after_evaluation(result.observed_at)
            await self._publish(result)
        return list(results)

    async def _sequence(self) -> tuple[Sequence | None, str]:
        """The stored sequence, or why there is none to read the checks from."""
        try:
            raw = await self._store.get(SEQUENCE_KEY)
        except RolloutError as exc:
            return None, f"the sequence could not be read from Redis: {exc}"
        if raw is None:
            namespace = self._settings.redis_namespace
            return None, f"no sequence is stored under {SEQUENCE_KEY!r} in Redis namespace {namespace!r}"
        try:
            return Sequence.model_validate_json(raw), ""
        except ValidationError as exc:
            return None, f"the stored sequence is not valid: {exc.errors()[0]['msg']}"

    async def _evaluate(self, key: SeriesKey, sequence: Sequence | None, problem: str) -> CheckResult:
        started = time.monotonic()
        check = None if sequence is None else _find(sequence, key)
        if sequence is None or check is None:
            name = sequence.name if sequence is not None else ""
            reason = problem or f"the sequence {name!r} has no check {key.check!r} at stage {key.stage!r}"
            result = self._inconclusive(key, reason)
        else:
            base_url = prometheus_base_url(sequence, self._settings.checks)
            result = await evaluate_check(
                self._query, check, rollout_id=key.rollout_id, stage=key.stage, base_url=base_url, clock=self._clock
            )
        self._metrics.check_evaluations.labels(outcome=result.outcome.value).inc()
        self._metrics.check_evaluation_seconds.observe(time.monotonic() - started)
        _log_result(key, result)
        return result

    def _inconclusive(self, key: SeriesKey, reason: str) -> CheckResult:
        return CheckResult(
            rollout_id=key.rollout_id,
            stage=key.stage,
            check=key.check,
            observed_at=self._clock(),
            value=None,
            outcome=CheckOutcome.INCONCLUSIVE,
            reason=reason,
        )

    async def _publish(self, result: CheckResult) -> None:
        at = self._clock()
        value, headers = encode(
            result,
            event_id=f"{result.rollout_id}/{result.stage}/{result.check}/{result.observed_at:.3f}",
            source=SOURCE,
            at=at,
            subject=result.rollout_id,
        )
        topic = self._settings.topic_prefix + CHECK_RESULTS.name
        try:
            await self._bus.publish(topic, key=CHECK_RESULTS.key(result).encode(), value=value, headers=headers)
        except TransientError as exc:
            self._metrics.check_results_unpublished.inc()
            log.warning("check result not published (the next evaluation follows): %s", exc)


def _find(sequence: Sequence, key: SeriesKey) -> Check | None:
    for stage in sequence.stages:
        if stage.name == key.stage:
            return next((check for check in stage.checks if check.name == key.check), None)
    return None


def _log_result(key: SeriesKey, result: CheckResult) -> None:
    """At warning level unless the check passed: a failed or inconclusive check wants a look."""
    log.log(
        logging.INFO if result.outcome is CheckOutcome.PASSED else logging.WARNING,
        "check %s of %s at %s: %s, %s",
        key.check,
        key.rollout_id,
        key.stage,
        result.outcome.value,
        result.reason,
        extra={
            "rollout": key.rollout_id,
            "stage": key.stage,
            "check": key.check,
            "outcome": result.outcome.value,
            "value": result.value,
        },
    )
