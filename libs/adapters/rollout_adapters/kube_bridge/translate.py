"""What an object of ours asks to publish, and the ids that make publishing it idempotent.

Pure functions of the object as the apiserver returns it. An event's id is derived from the
object's uid and generation (`k8s/<kind>/<uid>/<generation>`, a rollout command adds its action),
so the planner, which drops an id it has seen (BUS-3), takes a republished one once; and the
bridge publishes only a generation its status does not yet record as published, so a restart
or a re-list publishes nothing again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rollout_common.commands import StageTransition
from rollout_common.events import OperatorCommand, ReleaseTarget, SequenceChange, StartRollout
from rollout_common.sequence import Sequence
from rollout_common.status import StageState
from rollout_common.topics.catalog import OPERATOR_COMMANDS, RELEASE_TARGETS, TopicDef

ID_PREFIX = "k8s/"
_PUBLISHED = "Published"
_AWAITING_ANSWER = "published; waiting for the planner's answer"
_WAITING = "Waiting"
_AWAITING_APPROVAL = "the gate waits: set spec.approved to true (and approvedBy) to open it"
_NAME_UNSAFE = re.compile(r"[^a-z0-9.-]+")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str
    uid: str
    generation: int


@dataclass(frozen=True, slots=True)
class Publication:
    """One event to publish on `topic` under `event_id`."""

    topic: TopicDef
    model: BaseModel
    event_id: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What to publish for one generation of an object, and the status to write once published.
    `refusal` is set (and nothing published) when the spec is not a valid document."""

    publications: tuple[Publication, ...]
    status: dict[str, Any]
    refusal: str | None = None
    # (reason, message) of the `Accepted` condition while no answer is there to give yet
    pending: tuple[str, str] | None = None


def ref_of(kind: str, obj: Mapping[str, Any]) -> ObjectRef:
    meta = obj["metadata"]
    return ObjectRef(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta["name"]),
        uid=str(meta["uid"]),
        generation=int(meta.get("generation", 1)),
    )


def event_id(ref: ObjectRef, action: str | None = None) -> str:
    base = f"{ID_PREFIX}{ref.kind}/{ref.uid}/{ref.generation}"
    return f"{base}/{action}" if action else base


def parse_event_id(text: str) -> tuple[str, str, int] | None:
    """(kind, uid, generation) of an id this bridge made, else None."""
    if not text.startswith(ID_PREFIX):
        return None
    parts = text[len(ID_PREFIX) :].split("/")
    if len(parts) < 3 or not parts[2].isdigit():
        return None
    return parts[0], parts[1], int(parts[2])


def is_published(obj: Mapping[str, Any]) -> bool:
    """True when the object's status records its current generation as published."""
    status = obj.get("status") or {}
    generation = int(obj["metadata"].get("generation", 1))
    return int(status.get("publishedGeneration") or 0) >= generation


def issuer(ref: ObjectRef) -> str:
    return f"kubernetes:{ref.namespace}/{ref.kind}/{ref.name}"


def sequence_plan(obj: Mapping[str, Any]) -> Plan:
    """SEQ-7: a sequence's new generation is a sequence change for the running planner."""
    ref = ref_of("sequence", obj)
    published = {"publishedGeneration": ref.generation, "eventId": event_id(ref)}
    try:
        sequence = Sequence.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        # The CEL rules catch most of it; what needs the whole document (an upstream cycle) ends here.
        return Plan(publications=(), status=published, refusal=_first_problem(exc))
    change = SequenceChange(command_id=event_id(ref), sequence=sequence, issued_by=issuer(ref))
    return Plan(
        publications=(Publication(OPERATOR_COMMANDS, change, change.command_id),),
        status=published,
        pending=(_PUBLISHED, _AWAITING_ANSWER),
    )


def release_plan(obj: Mapping[str, Any]) -> Plan:
    """START-1 / START-2: a release object is one release-target or on-demand start event."""
    ref = ref_of("release", obj)
    spec = obj.get("spec") or {}
    published = {"publishedGeneration": ref.generation, "eventId": event_id(ref)}
    model: BaseModel
    try:
        if spec.get("version") is not None:
            tracks = spec.get("tracks") or ["controlPlane", "nodes"]
            model = StartRollout(event_id=event_id(ref), version=spec["version"], tracks=tracks)
        else:
            model = ReleaseTarget(event_id=event_id(ref), channel=spec.get("channel"), targets=spec.get("targets"))
    except ValidationError as exc:
        return Plan(publications=(), status=published, refusal=_first_problem(exc))
    return Plan(publications=(Publication(RELEASE_TARGETS, model, event_id(ref)),), status=published)


def rollout_plan(obj: Mapping[str, Any]) -> Plan:
    """OPS-1, OPS-2, OPS-4: the operator fields that changed since the bridge last acted on them."""
    ref = ref_of("rollout", obj)
    spec = obj.get("spec") or {}
    done = (obj.get("status") or {}).get("commanded") or {}
    rollout_id = str(spec.get("rolloutId", ""))
    commands = [
        OperatorCommand(
            command_id=event_id(ref, action),
            action=action,
            rollout_id=rollout_id,
            issued_by=issuer(ref),
            **narrowed,
        )
        for action, narrowed in _operator_actions(spec, done)
    ]
    status = {"publishedGeneration": ref.generation, "commanded": _commanded(spec, done)}
    return Plan(publications=tuple(Publication(OPERATOR_COMMANDS, c, c.command_id) for c in commands), status=status)


def _operator_actions(spec: Mapping[str, Any], done: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(action, the fields that narrow it) of each operator field changed since `done` was recorded."""
    actions: list[tuple[str, dict[str, Any]]] = []
    paused, cancelled = bool(spec.get("paused")), bool(spec.get("cancelled"))
    if cancelled and not done.get("cancelled"):
        actions.append(("cancel", {}))
    elif paused != bool(done.get("paused")):
        actions.append(("pause" if paused else "resume", {}))
    retry = spec.get("retry") or {}
    if retry.get("id") and retry.get("id") != done.get("retryId"):
        actions.append(("retry", {"stage": retry.get("stage"), "cluster": retry.get("cluster")}))
    return actions


def _commanded(spec: Mapping[str, Any], done: Mapping[str, Any]) -> dict[str, Any]:
    """What the status records as acted on, so the next generation publishes only what changed."""
    commanded: dict[str, Any] = {"paused": bool(spec.get("paused")), "cancelled": bool(spec.get("cancelled"))}
    retry_id = (spec.get("retry") or {}).get("id") or done.get("retryId")
    if retry_id:
        commanded["retryId"] = retry_id  # a status field is left out, never null
    return commanded


def approval_plan(obj: Mapping[str, Any]) -> Plan:
    """CHK-1: an approval object set to approved is one `approve` command for its rollout, stage
    and gate; one not approved yet publishes nothing and says it waits."""
    ref = ref_of("approval", obj)
    spec = obj.get("spec") or {}
    status: dict[str, Any] = {"publishedGeneration": ref.generation}
    if not spec.get("approved"):
        return Plan(publications=(), status=status, pending=(_WAITING, _AWAITING_APPROVAL))
    try:
        command = OperatorCommand(
            command_id=event_id(ref, "approve"),
            action="approve",
            rollout_id=spec.get("rolloutId"),
            stage=spec.get("stage"),
            gate=spec.get("gate"),
            issued_by=spec.get("approvedBy") or issuer(ref),
            comment=spec.get("comment"),
        )
    except ValidationError as exc:
        return Plan(publications=(), status=status, refusal=_first_problem(exc))
    status["eventId"] = command.command_id
    return Plan(
        publications=(Publication(OPERATOR_COMMANDS, command, command.command_id),),
        status=status,
        pending=(_PUBLISHED, _AWAITING_ANSWER),
    )


def approval_for(transition: StageTransition) -> tuple[str, dict[str, Any]] | None:
    """CHK-1: the name and spec of the approval object a track going AWAITING_APPROVAL asks for
    (both tracks of a gate ask for the same one), else None."""
    if transition.state is not StageState.AWAITING_APPROVAL or transition.gate is None:
        return None
    gate = transition.gate.value
    name = rollout_object_name(f"{transition.rollout_id}-{transition.stage}-{gate}")
    return name, {"rolloutId": transition.rollout_id, "stage": transition.stage, "gate": gate}


def rollout_object_name(rollout_id: str) -> str:
    """A DNS-1123 name for a planner's rollout id (`main-1` stays `main-1`), or for an approval's
    `<rollout>-<stage>-<gate>`."""
    name = _NAME_UNSAFE.sub("-", rollout_id.lower()).strip("-.")
    return name[:253] or "rollout"


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])
