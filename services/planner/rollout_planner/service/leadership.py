"""The planner's lease as a state machine (BUS-8): pure, no store and no clock of its own.

A planner is `STANDBY` until it takes the lease, `ACTIVE` while it holds it, and ends either
`LOST` (another planner's epoch is current, or it could not renew before its own deadline) or
`RELEASED` (it let go on a clean stop). Only `ACTIVE` before `valid_until` may decide or write.

`valid_until` is counted from when a take or renewal was *sent* (the store starts the TTL later),
on the monotonic clock, which keeps running while a process is paused: a planner resumed after
SIGSTOP sees its deadline passed before it decides anything, and the store's fenced write
refuses it in any case (`lease_keeper.PlannerLease`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from rollout_common.errors import PermanentError


class LeaseState(str, Enum):
    STANDBY = "standby"
    ACTIVE = "active"
    LOST = "lost"
    RELEASED = "released"


class LeaseEvent(str, Enum):
    TAKEN = "taken"  # the store gave this planner the lease (a new epoch)
    RENEWED = "renewed"  # the store extended it
    REFUSED = "refused"  # the store holds another token: a renewal or a fenced write was refused
    EXPIRED = "expired"  # the local deadline passed without a renewal (store unreachable, paused)
    RELEASED = "released"  # let go on a clean stop


_ALLOWED: dict[LeaseState, dict[LeaseEvent, LeaseState]] = {
    LeaseState.STANDBY: {LeaseEvent.TAKEN: LeaseState.ACTIVE, LeaseEvent.RELEASED: LeaseState.RELEASED},
    LeaseState.ACTIVE: {
        LeaseEvent.RENEWED: LeaseState.ACTIVE,
        LeaseEvent.REFUSED: LeaseState.LOST,
        LeaseEvent.EXPIRED: LeaseState.LOST,
        LeaseEvent.RELEASED: LeaseState.RELEASED,
    },
    LeaseState.LOST: {},
    LeaseState.RELEASED: {},
}


class LeaseLostError(PermanentError):
    """This planner no longer holds the lease: it must not decide or write (exit code 3)."""


class LeaseTransitionError(PermanentError):
    """A move the table does not allow (a bug in the caller)."""


@dataclass(frozen=True, slots=True)
class Leadership:
    state: LeaseState = LeaseState.STANDBY
    token: bytes | None = None
    valid_until: float = float("-inf")
    reason: str = ""

    @property
    def epoch(self) -> int | None:
        return None if self.token is None else int(self.token.split(b"/", 1)[0])

    def may_act(self, now: float) -> bool:
        """True while this planner may decide and write: active, and within its deadline."""
        return self.state is LeaseState.ACTIVE and now < self.valid_until


def transition(
    lease: Leadership, event: LeaseEvent, *, sent_at: float, ttl_s: float, token: bytes | None = None, reason: str = ""
) -> Leadership:
    """The lease after `event`; `sent_at` is when the store call behind it was sent."""
    target = _ALLOWED[lease.state].get(event)
    if target is None:
        raise LeaseTransitionError(f"lease: {event.value} is not allowed in state {lease.state.value}")
    match event:
        case LeaseEvent.TAKEN:
            if token is None:
                raise LeaseTransitionError("lease: taken without a token")
            return Leadership(state=target, token=token, valid_until=sent_at + ttl_s, reason=reason)
        case LeaseEvent.RENEWED:
            return replace(lease, valid_until=max(lease.valid_until, sent_at + ttl_s))
        case LeaseEvent.REFUSED | LeaseEvent.EXPIRED | LeaseEvent.RELEASED:
            return replace(lease, state=target, valid_until=float("-inf"), reason=reason or event.value)


__all__ = ["Leadership", "LeaseEvent", "LeaseLostError", "LeaseState", "LeaseTransitionError", "transition"]
