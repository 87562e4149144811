"""Handling one batch of stage-advance commands: every cluster upgraded at most once per target.

Per cluster of a command (at most `max_concurrent_upgrades` at once across the batch):
1. a recorded result for (cluster, track, version, retry count) is re-published under this
   command's id and nothing runs: a replayed command never upgrades twice, while an operator's
   retry (a higher count in `retries`, OPS-4) is a new attempt and runs once;
2. otherwise the executor takes the target's lease; while another executor holds it, it waits
   for that one's result (or for its lease to expire, if it died, and then takes over);
3. it publishes `started`, runs the driver under the lease, records the final result in the
   store, then publishes it. The caller commits the batch's offsets only after all of this.
   Once its driver has returned, the executor keeps that result until it is recorded: a lease
   that lapsed meanwhile (Redis away for longer than the lease) makes it take the lease again and
   record the result it holds, never run the driver a second time.
4. An executor that takes over a target another one held (its lease's epoch is above 1) and left
   without a recorded result (that one died, or lost its lease, after its driver may have
   finished) first asks the driver what the track runs (`VersionProbe`, when the driver has it and
   `probe_before_rerun` is on). Already the target version: it records and publishes `succeeded`
   without running the driver or publishing `started`. Otherwise, or when the driver cannot
   tell, it upgrades as in 3.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Sequence
from typing import Literal

from rollout_common.commands import StageAdvance
from rollout_common.envelope import decode, encode
from rollout_common.errors import InvalidInputError, RolloutError, TransientError
from rollout_common.events import UpgradeResult
from rollout_common.ports import Bus, Record
from rollout_common.topics.catalog import DEAD_LETTER, STAGE_ADVANCE, UPGRADE_RESULTS
from rollout_executor.dead_letters import dead_letter
from rollout_executor.drivers.port import DriverOutcome, UpgradeDriver, VersionProbe
from rollout_executor.lease import Clock, Lease, LeaseLostError
from rollout_executor.ledger import UpgradeLedger
from rollout_executor.metrics import ExecutorMetrics
from rollout_executor.retry import retried
from rollout_executor.target import UpgradeTarget

log = logging.getLogger(__name__)

Outcome = Literal["started", "succeeded", "failed"]


class Executor:
    def __init__(
        self,
        *,
        bus: Bus,
        ledger: UpgradeLedger,
        driver: UpgradeDriver,
        metrics: ExecutorMetrics,
        executor_id: str,
        topic_prefix: str = "",
        max_concurrent_upgrades: int = 5,
        wait_poll_s: float = 1.0,
        probe_before_rerun: bool = True,
        clock: Clock = time.time,
    ) -> None:
        self._bus = bus
        self._ledger = ledger
        self._driver = driver
        self._metrics = metrics
        self._executor_id = executor_id
        self._results_topic = topic_prefix + UPGRADE_RESULTS.name
        self._dead_letter_topic = topic_prefix + DEAD_LETTER.name
        self._slots = asyncio.Semaphore(max_concurrent_upgrades)
        self._wait_poll_s = wait_poll_s
        self._probe_before_rerun = probe_before_rerun
        self._clock = clock

    @property
    def source(self) -> str:
        return f"rollout-executor/{self._executor_id}"

    async def handle_batch(self, records: Sequence[Record]) -> None:
        """Handle every record; returns once all are done (their offsets may then be committed)."""
        commands: list[tuple[Record, StageAdvance]] = []
        for record in records:
            try:
                _, message = decode(record.value, record.headers, STAGE_ADVANCE.models)
            except InvalidInputError as exc:
                await self._dead_letter(record, str(exc))
                continue
            assert isinstance(message, StageAdvance)
            commands.append((record, message))
        # A TaskGroup: one command failing transiently cancels the others (their leases are
        # released) and the batch is not committed, so all of it is delivered again.
        async with asyncio.TaskGroup() as group:
            for record, command in commands:
                group.create_task(self._handle_isolated(record, command))
        self._metrics.batches.inc()

    async def _handle_isolated(self, record: Record, command: StageAdvance) -> None:
        """Anything but a transient failure that handling a command raises is that command's: it is
        dead-lettered and the batch goes on (BUS-4), rather than the process exiting on it for good."""
        try:
            await self.handle_command(command)
        except TransientError:
            raise
        except Exception as exc:
            if isinstance(exc, BaseExceptionGroup) and exc.subgroup(TransientError) is not None:
                raise
            log.exception("command %s raised; dead-lettered", command.command_id)
            await self._dead_letter(
                record, f"quarantined: handling command {command.command_id} raised {_describe(exc)}"
            )

    async def handle_command(self, command: StageAdvance) -> None:
        log.info(
            "command %s: %d cluster(s) to %s (%s)",
            command.command_id,
            len(command.clusters),
            command.version,
            command.track.value,
            extra={"command_id": command.command_id, "rollout_id": command.rollout_id},
        )
        async with asyncio.TaskGroup() as group:
            for cluster in dict.fromkeys(command.clusters):  # a cluster named twice is done once
                group.create_task(self._cluster(command, cluster))

    async def _cluster(self, command: StageAdvance, cluster: str) -> None:
        try:
            target = UpgradeTarget.checked(
                cluster=cluster, track=command.track, version=command.version, retry=command.retries.get(cluster, 0)
            )
        except InvalidInputError as exc:
            # Never reaches the store or a driver; the planner learns why from the result.
            self._metrics.upgrades.labels(track=command.track.value, outcome="rejected").inc()
            await self._publish(self._result(command, cluster, "failed", error=f"rejected: {exc}"))
            return
        async with self._slots:
            try:
                await self._upgrade_once(command, target)
            except (TransientError, LeaseLostError):
                raise
            except Exception as exc:
                # A driver or store failure nobody foresaw is this cluster's failed upgrade, said to
                # the planner like any other, not a crash of the executor (and of every restart).
                log.exception("upgrade of %s raised", target.key)
                self._metrics.upgrades.labels(track=command.track.value, outcome="failed").inc()
                await self._publish(self._result(command, cluster, "failed", error=f"executor error: {_describe(exc)}"))

    async def _upgrade_once(self, command: StageAdvance, target: UpgradeTarget) -> None:
        earlier = await retried(lambda: self._ledger.claim(target, command_id=command.command_id), what="claim")
        if earlier is not None:
            log.info("%s already claimed by %s (command %s)", target.key, earlier.executor_id, earlier.command_id)
        # This executor's own driver result, once it has one, kept until it is recorded (BUS-3).
        known: UpgradeResult | None = None
        while not await self._replayed(command, target):
            lease = self._ledger.lease(target)
            if not await retried(lease.acquire, what="acquire lease"):
                # Another executor is upgrading it: wait for its result, or for its lease to
                # lapse if it died.
                await asyncio.sleep(self._wait_poll_s)
                continue
            try:
                known, done = await self._under_lease(lease, command, target, known=known)
            finally:
                # Shielded: on cancellation (shutdown) the lease must still be let go of.
                await asyncio.shield(self._release(lease))
            if done:
                return

    async def _under_lease(
        self, lease: Lease, command: StageAdvance, target: UpgradeTarget, *, known: UpgradeResult | None
    ) -> tuple[UpgradeResult | None, bool]:
        """With the target's lease held: find the result unless `known` already holds it, record
        it, publish it. Returns the result known by then, and whether it is done.

        A result the store refused (the lease lapsed while Redis was away, or another executor
        took it) is not given up: it is returned, and recorded under the next lease taken, so the
        driver never runs twice for what this executor already did.
        """
        # The previous holder may have recorded its result just before letting go.
        if await self._replayed(command, target):
            return known, True
        try:
            if known is None:
                known = await self._outcome(lease, command, target)
            # Refused (LeaseLostError) when the lease lapsed or another executor took it.
            await retried(functools.partial(self._ledger.record, target, known, lease=lease), what="record")
        except LeaseLostError:
            self._lease_lost(target, known)
            return known, False
        await self._publish(known)
        return known, True

    def _lease_lost(self, target: UpgradeTarget, known: UpgradeResult | None) -> None:
        self._metrics.leases_lost.inc()
        if known is None:
            log.warning("%s: lease lost; the upgrade was stopped", target.key)
        else:
            log.warning(
                "%s: lease lost before the %s result was recorded; recording it under a new lease",
                target.key,
                known.outcome,
            )

    async def _outcome(self, lease: Lease, command: StageAdvance, target: UpgradeTarget) -> UpgradeResult:
        """`succeeded` without an upgrade when an earlier holder's run is observed to have taken
        effect; otherwise the result of running the driver."""
        if await self._observed_done(lease, target):
            log.info(
                "%s: already at %s, observed before re-run; not upgraded again",
                target.key,
                target.version,
                extra={"cluster": target.cluster, "driver": self._driver.name},
            )
            return self._result(command, target.cluster, "succeeded")
        return await self._run_under(lease, command, target)

    async def _observed_done(self, lease: Lease, target: UpgradeTarget) -> bool:
        """Whether the track already runs the target version, asked only on a takeover: epoch 1 is
        the first lease ever taken on the target, so no driver can have run for it before, and a
        first upgrade costs no extra call to the system (a takeover costs one, under the lease)."""
        if not self._probe_before_rerun or lease.fencing_token <= 1 or not isinstance(self._driver, VersionProbe):
            return False
        try:
            observed = await lease.hold(self._driver.observed_version(target))
        except LeaseLostError:
            raise
        except Exception as exc:  # a probe that fails cannot tell: the upgrade runs as it would have
            log.warning("%s: probing the running version raised %s; upgrading again", target.key, _describe(exc))
            return False
        if observed is None:
            log.info("%s: taken over; the driver cannot tell what runs, so it upgrades again", target.key)
            return False
        if observed.removeprefix("v") != target.version.removeprefix("v"):
            log.info("%s: taken over; the track runs %s, so it upgrades again", target.key, observed)
            return False
        return True

    async def _run_under(self, lease: Lease, command: StageAdvance, target: UpgradeTarget) -> UpgradeResult:
        """Publish `started` and run the driver while renewing `lease`; its final result.

        The `started` publish is held under the lease too: with the broker away it can wait for
        minutes (an idempotent producer never gives a record up), and a lease not renewed meanwhile
        lapsed, so the driver's result was refused and the same upgrade ran again at once (BUS-3;
        found by the chaos test's broker restarts). LeaseLostError when the lease was lost and the
        driver stopped.
        """
        outcome = await lease.hold(self._start(command, target, fencing_token=lease.fencing_token))
        return self._result(
            command, target.cluster, "succeeded" if outcome.succeeded else "failed", error=outcome.error
        )

    async def _start(self, command: StageAdvance, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        await self._publish(self._result(command, target.cluster, "started"))
        return await self._run_driver(target, fencing_token=fencing_token)

    async def _run_driver(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome:
        started = time.monotonic()
        outcome = await self._driver.upgrade(target, fencing_token=fencing_token)
        self._metrics.duration.labels(track=target.track.value).observe(time.monotonic() - started)
        self._metrics.upgrades.labels(
            track=target.track.value, outcome="succeeded" if outcome.succeeded else "failed"
        ).inc()
        log.info(
            "%s: %s%s",
            target.key,
            "succeeded" if outcome.succeeded else "failed",
            f" ({outcome.error})" if outcome.error else "",
            extra={"cluster": target.cluster, "driver": self._driver.name},
        )
        return outcome

    async def _replayed(self, command: StageAdvance, target: UpgradeTarget) -> bool:
        recorded = await retried(lambda: self._ledger.result(target), what="read result")
        if recorded is None:
            return False
        # Under this command's id: the planner matches results to the command it is waiting on.
        await self._publish(recorded.model_copy(update={"command_id": command.command_id}))
        self._metrics.replayed.inc()
        log.info("%s: already %s, result re-published", target.key, recorded.outcome)
        return True

    async def _release(self, lease: Lease) -> None:
        try:
            await lease.release()
        except RolloutError as exc:  # the lease expires anyway; a failed release only delays others
            log.warning("releasing a lease failed: %s", exc)

    def _result(
        self, command: StageAdvance, cluster: str, outcome: Outcome, *, error: str | None = None
    ) -> UpgradeResult:
        return UpgradeResult(
            command_id=command.command_id,
            cluster=cluster,
            track=command.track,
            version=command.version,
            outcome=outcome,
            error=error,
            # when the executor saw the outcome: readiness observed before it does not count (BUS-7)
            finished_at=None if outcome == "started" else self._clock(),
        )

    async def _publish(self, result: UpgradeResult) -> None:
        # Deterministic ids: a consumer can drop a result it has already seen.
        event_id = f"{result.command_id}/{result.cluster}/{result.track.value}/{result.outcome}"
        value, headers = encode(result, event_id=event_id, source=self.source, at=self._clock(), subject=result.cluster)
        key = UPGRADE_RESULTS.key(result).encode()
        await retried(
            lambda: self._bus.publish(self._results_topic, key=key, value=value, headers=headers),
            what=f"publish {result.outcome} of {result.cluster}",
        )

    async def _dead_letter(self, record: Record, reason: str) -> None:
        self._metrics.dead_letters.inc()
        self._metrics.dead_letters_by_kind.record(record, reason=reason, source=self.source)
        await dead_letter(self._bus, topic=self._dead_letter_topic, record=record, reason=reason, source=self.source)


def _describe(error: BaseException) -> str:
    first_line = (str(error).splitlines() or [""])[0][:500]
    return f"{type(error).__name__}: {first_line}"
