"""What the executors remember in the store, per upgrade target (cluster, track, version).

- `executor:claim:<target>`: who first took the target (command id and executor id), written
  once with `put_if_absent`; later claimants read it to log a takeover.
- `executor:lease:<target>`: who is upgrading it now, and `executor:lease-epoch:<target>` its
  fencing token (see `lease.Lease`).
- `executor:result:<target>`: the final UpgradeResult, written only while the writer still holds
  the target's lease (a fenced write: a holder that lost it has its result refused, and keeps it
  to record under the next lease it takes), and before the command's offset is committed. Once
  it exists the target is never upgraded again: a replayed or re-sent command gets the recorded
  result re-published instead. A failed upgrade is final for its attempt; an operator's retry
  (OPS-4) arrives with the cluster's retry count raised, which is a target of its own
  (`<target>:retry-<n>`), so it runs once more, and a redelivery of that retry runs never again.

The window left: an executor that dies after its driver finished but before the result is
recorded leaves the target to the next one, and so does an executor that takes over a lapsed lease
while the first one still waits for Redis to take its result. The next holder asks the driver
what the track runs before it upgrades (`Executor`, `probe_before_rerun`) and records success
when the version is already there; a driver that cannot tell upgrades again. Drivers must
therefore still be idempotent (upgrading a cluster to the version it already runs is a no-op),
as GKE's upgrade call is.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from pydantic import ValidationError

from rollout_common.errors import InvalidInputError
from rollout_common.events import UpgradeResult
from rollout_common.ports import Store
from rollout_executor.lease import Lease, LeaseLostError
from rollout_executor.target import UpgradeTarget


@dataclass(frozen=True, slots=True)
class Claim:
    command_id: str
    executor_id: str


class UpgradeLedger:
    def __init__(self, store: Store, *, executor_id: str, lease_s: float) -> None:
        self._store = store
        self._executor_id = executor_id
        self._lease_s = lease_s

    async def claim(self, target: UpgradeTarget, *, command_id: str) -> Claim | None:
        """Record this executor as the target's first claimant; else return the earlier claim."""
        mine = json.dumps({"commandId": command_id, "executor": self._executor_id}).encode()
        key = f"executor:claim:{target.key}"
        if await self._store.put_if_absent(key, mine):
            return None
        raw = await self._store.get(key)
        if raw is None:  # deleted in between by hand: nobody else holds it
            return None
        data = json.loads(raw)
        return Claim(command_id=str(data.get("commandId")), executor_id=str(data.get("executor")))

    def lease(self, target: UpgradeTarget) -> Lease:
        # A fresh token per attempt: two tasks of one executor never mistake each other's lease.
        token = f"{self._executor_id}/{uuid.uuid4().hex[:8]}"
        return Lease(self._store, key=f"executor:lease:{target.key}", holder=token, lease_s=self._lease_s)

    async def result(self, target: UpgradeTarget) -> UpgradeResult | None:
        raw = await self._store.get(f"executor:result:{target.key}")
        if raw is None:
            return None
        try:
            return UpgradeResult.model_validate_json(raw)
        except ValidationError as exc:
            raise InvalidInputError(f"stored result of {target.key} is unreadable: {exc}") from exc

    async def record(self, target: UpgradeTarget, result: UpgradeResult, *, lease: Lease) -> None:
        """Record the final result, only while `lease` still holds the target (else LeaseLostError)."""
        token = lease.token
        value = result.model_dump_json(by_alias=True).encode()
        if token is None or not await self._store.put_many_fenced(
            {f"executor:result:{target.key}": value}, fence_key=lease.key, token=token
        ):
            raise LeaseLostError(lease.key)
