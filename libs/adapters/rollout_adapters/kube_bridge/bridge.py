"""The bridge's shell: watches our resources, publishes their events, writes progress into status.

It works only while it holds the Lease (`lease.py`); a standby replica waits for it. Everything
it writes to the apiserver is server-side apply of the status subresource under one field
manager, always the whole status it keeps for that object, so its writes never fight each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx2 as httpx
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import GenericNamespacedResource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.types import PatchType
from pydantic import BaseModel

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.kube_bridge import progress
from rollout_adapters.kube_bridge.crds import GROUP, VERSION
from rollout_adapters.kube_bridge.resources import UpgradeApproval, UpgradeRelease, UpgradeRollout, UpgradeSequence
from rollout_adapters.kube_bridge.settings import BridgeSettings
from rollout_adapters.kube_bridge.translate import (
    Plan,
    approval_for,
    approval_plan,
    is_published,
    parse_event_id,
    release_plan,
    rollout_object_name,
    rollout_plan,
    sequence_plan,
)
from rollout_common import envelope
from rollout_common.commands import CommandAck, RolloutTransition, StageTransition
from rollout_common.errors import InvalidInputError, PermanentError, RolloutError
from rollout_common.status import RolloutState
from rollout_common.topics.catalog import ALL, PROGRESS

log = logging.getLogger(__name__)

FIELD_MANAGER = "rollout-kube-bridge"
GROUP_NAME = "rollout-kube-bridge"
_FOLLOWER_STOP_S = 15.0
Resource = type[GenericNamespacedResource]
_KINDS: dict[str, tuple[Resource, Callable[[Mapping[str, Any]], Plan]]] = {
    "sequence": (UpgradeSequence, sequence_plan),
    "release": (UpgradeRelease, release_plan),
    "rollout": (UpgradeRollout, rollout_plan),
    "approval": (UpgradeApproval, approval_plan),
}
# The planner's answer to an approval of a gate approved already (CHK-1, BUS-3).
ALREADY_APPROVED = "ALREADY_APPROVED"
# A rollout in these states has no gate waiting any more (CHK-1: cancel discards its gates).
_ENDED = (RolloutState.CANCELLED, RolloutState.COMPLETED)


def _as_dict(obj: Any) -> dict[str, Any]:
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)


def _now_text() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def condition(*, accepted: bool | None, reason: str, message: str, generation: int) -> dict[str, Any]:
    status = "Unknown" if accepted is None else ("True" if accepted else "False")
    return {
        "type": "Accepted",
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": generation,
        "lastTransitionTime": _now_text(),
    }


def _planned_status(kept: Mapping[str, Any], plan: Plan, *, generation: int) -> dict[str, Any]:
    """The status to write once the plan is published: its fields, and a condition when it was
    refused or waits for an answer."""
    status = {**kept, **plan.status}
    if plan.refusal is not None:
        status["conditions"] = [
            condition(accepted=False, reason="Invalid", message=plan.refusal, generation=generation)
        ]
    elif plan.pending is not None:
        reason, message = plan.pending
        status["conditions"] = [condition(accepted=None, reason=reason, message=message, generation=generation)]
    return status


class Bridge:
    def __init__(self, *, client: AsyncClient, bus: KafkaBus, settings: BridgeSettings) -> None:
        self._client = client
        self._bus = bus
        self._settings = settings
        self._namespace = settings.namespace
        self._prefix = settings.topic_prefix
        # (kind, name) -> the whole status this bridge last wrote; uid -> (kind, name)
        self._status: dict[tuple[str, str], dict[str, Any]] = {}
        self._by_uid: dict[str, tuple[str, str]] = {}
        self._uid_of: dict[tuple[str, str], str] = {}
        self._rollout_names: dict[str, str] = {}
        # rollout id -> the names of its approval objects not approved yet
        self._unapproved: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()
        self.published = 0
        self.synced = asyncio.Event()
        self._listed: set[str] = set()

    async def run(self, stop: asyncio.Event) -> None:
        """Watch our four kinds and follow the progress stream until `stop` is set."""
        if self._settings.create_topics:
            await self._bus.ensure_topics([t.spec(self._prefix) for t in ALL])
        tasks = [asyncio.create_task(self._follow(kind), name=f"watch-{kind}") for kind in _KINDS]
        follower = asyncio.create_task(self._follow_progress(stop), name="progress")
        tasks.append(follower)
        stopper = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopper:
                    task.result()
        finally:
            if stop.is_set() and not follower.done():
                # It ends at its next poll and closes its consumer itself: cancelled while it
                # joins the group, the consumer's connections could be left open.
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(follower, timeout=_FOLLOWER_STOP_S)
            for task in (*tasks, stopper):
                task.cancel()
            for task in (*tasks, stopper):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    # -- our resources -> Kafka --------------------------------------------------------------

    async def _follow(self, kind: str) -> None:
        resource, _ = _KINDS[kind]
        version: str | None = None
        while True:
            try:
                if version is None:
                    version = await self._list(kind, resource)
                watch = self._client.watch(
                    resource,
                    namespace=self._namespace,
                    resource_version=version,
                    server_timeout=self._settings.watch_timeout_s,
                )
                async for event_type, obj in watch:
                    body = _as_dict(obj)
                    version = str(body["metadata"].get("resourceVersion") or version)
                    await self._on_watch_event(kind, event_type, body)
            except ApiError as exc:
                if exc.status.code == 410:
                    version = None  # expired: list again; published generations are skipped
                    continue
                if exc.status.code in (401, 403, 404):
                    raise PermanentError(f"watching {kind}s: {exc.status.message}") from exc
                await self._pause(f"watching {kind}s: {exc.status.message}")
            except (httpx.HTTPError, OSError, RolloutError) as exc:
                if isinstance(exc, PermanentError):
                    raise
                await self._pause(f"watching {kind}s: {exc}")

    async def _list(self, kind: str, resource: Resource) -> str | None:
        """Take every object of `kind` as it is now; the resource version to watch from."""
        listing = self._client.list(resource, namespace=self._namespace)
        async for obj in listing:
            await self._on_object(kind, _as_dict(obj))
        self._listed.add(kind)
        if len(self._listed) == len(_KINDS):
            self.synced.set()
        return listing.resourceVersion

    async def _on_watch_event(self, kind: str, event_type: str, body: Mapping[str, Any]) -> None:
        if event_type in ("ADDED", "MODIFIED"):
            await self._on_object(kind, body)
        elif event_type == "DELETED":
            self._forget(kind, body)

    async def _pause(self, why: str) -> None:
        log.warning("%s; resuming in %.0f s", why, self._settings.retry_s)
        await asyncio.sleep(self._settings.retry_s)

    def _forget(self, kind: str, obj: Mapping[str, Any]) -> None:
        """A deleted object's kept status must not pass for that of a new one of the same name."""
        key = (kind, str(obj["metadata"]["name"]))
        self._status.pop(key, None)
        self._uid_of.pop(key, None)
        if kind == "rollout":
            self._rollout_names.pop(str((obj.get("spec") or {}).get("rolloutId")), None)
        if kind == "approval":
            self._unapproved.get(str((obj.get("spec") or {}).get("rolloutId")), set()).discard(key[1])

    async def _on_object(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        key = (kind, str(meta["name"]))
        uid = str(meta["uid"])
        self._by_uid[uid] = key
        async with self._lock:
            self._remember(kind, obj, key=key, uid=uid)
            if is_published({**obj, "status": self._status[key]}):
                return
            plan = _KINDS[kind][1]({**obj, "status": self._status[key]})
            await self._publish_plan(kind, key[1], plan)
            status = _planned_status(self._status[key], plan, generation=int(meta.get("generation", 1)))
            await self._write_status(kind, key[1], status)

    def _remember(self, kind: str, obj: Mapping[str, Any], *, key: tuple[str, str], uid: str) -> None:
        """Keep what the object says (its status under the one this bridge wrote); caller holds the lock."""
        if self._uid_of.setdefault(key, uid) != uid:
            self._forget(kind, obj)  # deleted and made again while the watch was down
            self._uid_of[key] = uid
        self._status[key] = {**(obj.get("status") or {}), **self._status.get(key, {})}
        if kind == "rollout":
            self._rollout_names[str((obj.get("spec") or {}).get("rolloutId"))] = key[1]
        if kind == "approval":
            self._note_approval(key[1], obj.get("spec") or {})

    async def _publish_plan(self, kind: str, name: str, plan: Plan) -> None:
        for item in plan.publications:
            value, headers = envelope.encode(
                item.model, event_id=item.event_id, source=self._settings.source, at=time.time()
            )
            topic = self._prefix + item.topic.name
            await self._bus.publish(topic, key=item.topic.key(item.model).encode(), value=value, headers=headers)
            self.published += 1
            log.info("published %s for %s %s", item.event_id, kind, name)

    def _note_approval(self, name: str, spec: Mapping[str, Any]) -> None:
        unapproved = self._unapproved.setdefault(str(spec.get("rolloutId")), set())
        if spec.get("approved"):
            unapproved.discard(name)
        else:
            unapproved.add(name)

    async def _write_status(self, kind: str, name: str, status: dict[str, Any]) -> None:
        """Server-side apply of the whole status this bridge keeps (caller holds the lock)."""
        resource = _KINDS[kind][0]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": resource.__name__,
            "metadata": {"name": name, "namespace": self._namespace},
            "status": status,
        }
        await self._client.patch(
            resource.Status,
            name,
            body,
            namespace=self._namespace,
            patch_type=PatchType.APPLY,
            field_manager=FIELD_MANAGER,
            force=True,
        )
        self._status[(kind, name)] = status

    # -- Kafka progress -> rollout status ------------------------------------------------------

    async def _follow_progress(self, stop: asyncio.Event) -> None:
        topic = self._prefix + PROGRESS.name
        consumer = self._bus.consumer([topic], group=self._settings.group(GROUP_NAME))
        try:
            while not stop.is_set():
                records = await consumer.poll(timeout_s=1.0)
                for record in records:
                    try:
                        _, model = envelope.decode(record.value, record.headers, PROGRESS.models)
                    except InvalidInputError as exc:
                        log.warning("progress record %s/%d skipped: %s", record.partition, record.offset, exc)
                        continue
                    await self._until_written(model)
                if records:
                    await consumer.commit(records)
        finally:
            await consumer.close()

    async def _until_written(self, model: BaseModel) -> None:
        """Apply one progress event, retrying what the apiserver may answer differently later."""
        while True:
            try:
                await self._on_progress(model)
                return
            except ApiError as exc:
                if (exc.status.code or 0) < 500 and exc.status.code not in (409, 429):
                    raise PermanentError(f"writing a rollout's status: {exc.status.message}") from exc
                await self._pause(f"writing a rollout's status: {exc.status.message}")
            except (httpx.HTTPError, OSError) as exc:
                await self._pause(f"writing a rollout's status: {exc}")

    async def _on_progress(self, model: BaseModel) -> None:
        if isinstance(model, CommandAck):
            await self._on_ack(model)
            return
        if isinstance(model, StageTransition):
            await self._create_approval(model)
        if isinstance(model, RolloutTransition) and model.state in _ENDED:
            await self._discard_approvals(model)
        rollout_id = progress.rollout_id_of(model)
        if rollout_id is None:
            return
        name = self._rollout_names.get(rollout_id) or await self._create_rollout(rollout_id)
        async with self._lock:
            key = ("rollout", name)
            status = progress.fold(self._status.get(key, {}), model)
            await self._write_status("rollout", name, status)

    async def _create_rollout(self, rollout_id: str) -> str:
        name = rollout_object_name(rollout_id)
        body = UpgradeRollout(metadata=ObjectMeta(name=name, namespace=self._namespace), spec={"rolloutId": rollout_id})
        try:
            await self._client.create(body)
        except ApiError as exc:
            if exc.status.code != 409:  # made already (by this bridge before a restart)
                raise
        self._rollout_names[rollout_id] = name
        return name

    async def _create_approval(self, transition: StageTransition) -> None:
        """CHK-1: a gate starts waiting, so its approval object exists for a user to approve. Made
        once: the other track's transition, a redelivery or a restart finds it made (409)."""
        wanted = approval_for(transition)
        if wanted is None:
            return
        name, spec = wanted
        body = UpgradeApproval(metadata=ObjectMeta(name=name, namespace=self._namespace), spec=spec)
        try:
            await self._client.create(body)
            log.info("made approval %s for the %s gate of stage %s", name, spec["gate"], spec["stage"])
        except ApiError as exc:
            if exc.status.code != 409:
                raise

    async def _discard_approvals(self, ended: RolloutTransition) -> None:
        """CHK-1: a rollout that ended leaves no gate waiting, so its approvals not given say so
        rather than wait on in `kubectl get` (approving one then is refused by the planner)."""
        message = f"rollout {ended.rollout_id} is {ended.state.value} ({ended.reason}); the gate no longer waits"
        async with self._lock:
            for name in sorted(self._unapproved.pop(ended.rollout_id, set())):
                key = ("approval", name)
                generation = int(self._status.get(key, {}).get("publishedGeneration") or 1)
                gone = condition(accepted=False, reason="Discarded", message=message, generation=generation)
                try:
                    await self._write_status("approval", name, {**self._status.get(key, {}), "conditions": [gone]})
                except ApiError as exc:
                    if exc.status.code != 404:  # deleted meanwhile: nothing to say
                        raise

    async def _on_ack(self, ack: CommandAck) -> None:
        """OPS-3 / SEQ-7: the planner's answer to a command this bridge published, as a condition."""
        parsed = parse_event_id(ack.command_id)
        if parsed is None:
            return
        _, uid, generation = parsed
        key = self._by_uid.get(uid)
        if key is None:
            return
        async with self._lock:
            reason = "Accepted" if ack.accepted else "Refused"
            if ack.accepted and ack.reason == ALREADY_APPROVED:
                reason = "AlreadyApproved"
            status = {
                **self._status.get(key, {}),
                "conditions": [
                    condition(accepted=ack.accepted, reason=reason, message=ack.reason, generation=generation)
                ],
            }
            await self._write_status(key[0], key[1], status)
