"""The port every upgrade driver implements: upgrade one cluster's track to a version; and the
optional probe of what a cluster's track runs now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rollout_executor.target import UpgradeTarget


@dataclass(frozen=True, slots=True)
class DriverOutcome:
    succeeded: bool
    error: str | None = None


class UpgradeDriver(Protocol):
    """Runs one upgrade to its end. A failed upgrade is an outcome, not an exception.

    Cancellation (executor shutdown, lost lease) must stop the work it started.
    `fencing_token` is the epoch of the executor's lease on the target: it only grows from one
    holder to the next, so the system upgraded can refuse an order with a smaller token than one
    it has already seen (a stale holder).
    """

    name: str

    async def upgrade(self, target: UpgradeTarget, *, fencing_token: int) -> DriverOutcome: ...


@runtime_checkable
class VersionProbe(Protocol):
    """A driver that can tell what a cluster's track runs, asked before an upgrade that another
    executor started and left unrecorded is run a second time.

    The answer is the version as the commands name it (a leading `v` is ignored), or None when the
    driver cannot tell (no probe configured, the system did not answer): the executor then upgrades
    as it would have without asking. Never raises for the system's failures.
    """

    async def observed_version(self, target: UpgradeTarget) -> str | None: ...
