"""What `rollout watch` learns about gates from stage transitions on the progress stream (CHK-1, CHK-3).

The stored status document has each stage's approval gates and the waits at them; the progress
stream carries only transitions, whose reasons the engine words the same way every time ("the
before approval of stage prod, waiting since ...", "... given by alice at ..."). Those words are
read back here so a live screen shows the gates and waits as `rollout status` would.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

_GATE = re.compile(r"the (?P<gate>before|after) approval of stage ")
# `by` is greedy: a name may hold " at ", the instant after the last one is ISO 8601
_APPROVED = re.compile(r"given by (?P<by>.*) at (?P<at>\d{4}-\d\d-\d\dT[0-9:.+-]+)(?: \((?P<comment>.*)\))? \(CHK-1\)$")
_SINCE = re.compile(r"waiting since (?P<at>\d{4}-\d\d-\d\dT[0-9:.+-]+) \(CHK-1\)$")
_OPENS = re.compile(r"the window opens at (?P<at>\d{4}-\d\d-\d\dT[0-9:.+-]+) \(CHK-3\)$")
# the planner's acknowledgement of an approval: the only word of a `before` approval on the stream
_ACCEPTED = re.compile(
    r"^the (?P<gate>before|after) gate of stage (?P<stage>\S+) approved by (?P<by>.*) for (?P<ids>[^ ]+(, [^ ]+)*)$"
)
_UNNAMED = "an unnamed approver"


def gate_waits(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wait a transition into a gate announces (its track's only wait until it moves again)."""
    state, reason = body.get("state"), str(body.get("reason") or "")
    rollout = body.get("rolloutId")
    if state == "AWAITING_APPROVAL" and reason.endswith("(CHK-1)"):
        return [{"rule": "CHK-1", "message": f"rollout {rollout}: {reason}", "clusters": [], "numbers": {}}]
    opens = _OPENS.search(reason)
    if state == "PENDING" and opens is not None:
        until = _epoch(opens["at"])
        return [{"rule": "CHK-3", "message": f"rollout {rollout}: {reason}", "clusters": [], "until": until}]
    return []


def record_gate(gates: list[dict[str, Any]], body: Mapping[str, Any], *, prior: str, now: float) -> None:
    """A transition into AWAITING_APPROVAL reaches a gate; one out of it with an approval opens it."""
    reason = str(body.get("reason") or "")
    found = _GATE.search(reason)
    if found is None or not reason.endswith("(CHK-1)"):
        return
    key = {"rollout": body.get("rolloutId"), "gate": found["gate"]}
    gate = next((g for g in gates if g["rollout"] == key["rollout"] and g["gate"] == key["gate"]), None)
    if gate is None:
        since = _SINCE.search(reason)
        reached = (since and _epoch(since["at"])) or now
        gate = {**key, "waitingSince": reached, "approvedAt": None, "approvedBy": None, "comment": None}
        gates.append(gate)
    approved = _APPROVED.search(reason)
    if approved is not None and prior == "AWAITING_APPROVAL" and body.get("state") != "AWAITING_APPROVAL":
        by = approved["by"]
        gate.update(
            approvedAt=_epoch(approved["at"]) or now,
            approvedBy=None if by == _UNNAMED else by,
            comment=approved["comment"],
        )


def record_approval_ack(stages: list[dict[str, Any]], body: Mapping[str, Any], *, now: float) -> None:
    """An accepted `approve` names the gate, the approver and the rollouts it opened for (no comment)."""
    found = _ACCEPTED.match(str(body.get("reason") or ""))
    if not body.get("accepted") or found is None:
        return
    for stage in stages:
        if stage["name"] != found["stage"]:
            continue
        for gate in stage.get("gates") or ():
            if gate["gate"] == found["gate"] and gate["rollout"] in found["ids"].split(", "):
                gate.update(approvedAt=now, approvedBy=None if found["by"] == _UNNAMED else found["by"])


def _epoch(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


__all__ = ["gate_waits", "record_approval_ack", "record_gate"]
