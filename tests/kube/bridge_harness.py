"""Running bridge replicas in a test, and reading what they published or wrote."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx2 as httpx
import yaml
from lightkube import AsyncClient
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ServiceAccountToken

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.kube_bridge.serve import Replica
from rollout_adapters.kube_bridge.settings import BridgeSettings
from rollout_common import envelope
from rollout_common.commands import Notice
from rollout_common.topics.catalog import TopicDef

T = TypeVar("T")
DEADLINE_S = 60.0


def bridge_settings(*, kubeconfig: Path, namespace: str, prefix: str, bootstrap: str, name: str) -> BridgeSettings:
    return BridgeSettings(
        kafka_bootstrap=bootstrap,
        topic_prefix=prefix,
        kubeconfig=kubeconfig,
        namespace=namespace,
        identity=name,
        lease_duration_s=3,
        lease_renew_s=0.3,
        retry_s=0.2,
        watch_timeout_s=30,
    )


@contextlib.asynccontextmanager
async def running(settings: BridgeSettings) -> AsyncIterator[tuple[Replica, asyncio.Task[bool]]]:
    """A replica running until the block ends (then stopped cleanly, giving the Lease up)."""
    replica = Replica(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(replica.run(stop))
    try:
        yield replica, task
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, timeout=DEADLINE_S)


class Started:
    """A replica started outside a `with` block, stopped with `stop()` (cleanly: the Lease is given up)."""

    def __init__(self, settings: BridgeSettings) -> None:
        self.replica = Replica(settings)
        self._stop = asyncio.Event()
        self.task = asyncio.create_task(self.replica.run(self._stop))

    async def stop(self) -> bool:
        self._stop.set()
        return await asyncio.wait_for(self.task, timeout=DEADLINE_S)


async def eventually(probe: Callable[[], Awaitable[T | None]], *, what: str, timeout_s: float = DEADLINE_S) -> T:
    """Poll `probe` until it returns something other than None (or fail after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = await probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        await asyncio.sleep(0.1)


async def everything_on(bus: KafkaBus, topic: TopicDef, *, prefix: str) -> list[tuple[str, Any]]:
    """(ce_id, model) of every record on the topic, read up to a marker this call publishes last,
    so nothing published before the call is missed and no fixed wait is needed."""
    records = await _records_up_to_marker(bus, topic, prefix=prefix)
    return [
        (headers.get("ce_id", b"").decode(), envelope.decode(value, headers, topic.models)[1])
        for value, headers in records
    ]


async def sources_on(bus: KafkaBus, topic: TopicDef, *, prefix: str) -> list[str]:
    """The `ce_source` of every record on the topic (read as `everything_on` reads)."""
    records = await _records_up_to_marker(bus, topic, prefix=prefix)
    return [headers.get("ce_source", b"").decode() for _, headers in records]


async def _records_up_to_marker(bus: KafkaBus, topic: TopicDef, *, prefix: str) -> list[tuple[bytes, dict[str, bytes]]]:
    name = prefix + topic.name
    marker = f"marker-{uuid.uuid4().hex}"
    value, headers = envelope.encode(Notice(code="marker", message=marker), event_id=marker, source="test", at=0.0)
    key = b"marker"
    await bus.publish(name, key=key, value=value, headers=headers)
    consumer = bus.consumer([name], group=f"{prefix}reader-{uuid.uuid4().hex[:6]}")
    seen: list[tuple[bytes, dict[str, bytes]]] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            for record in await consumer.poll(timeout_s=1.0):
                if record.headers.get("ce_id", b"").decode() == marker:
                    return seen
                seen.append((record.value, dict(record.headers)))
    finally:
        await consumer.close()
    raise AssertionError(f"the marker never came back on {name}")


async def _connection(kubeconfig: Path) -> tuple[str, str, ssl.SSLContext]:
    """(server URL, admin token, TLS context) of an admin kubeconfig with a token."""
    config = yaml.safe_load(await asyncio.to_thread(kubeconfig.read_text))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    return cluster["server"], user["token"], context


async def table(kubeconfig: Path, path: str) -> dict[str, Any]:
    """GET `path` as the API's table output (what `kubectl get` prints: the printer columns)."""
    server, token, context = await _connection(kubeconfig)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    async with httpx.AsyncClient(verify=context) as client:
        answer = await client.get(server + path, headers=headers)
    answer.raise_for_status()
    document: dict[str, Any] = answer.json()
    return document


async def merge_patch_as(kubeconfig: Path, path: str, body: dict[str, Any], *, user: str) -> httpx.Response:
    """A merge patch of `path` by the admin impersonating `user` (the Impersonate-User header)."""
    server, token, context = await _connection(kubeconfig)
    headers = {
        "Authorization": f"Bearer {token}",
        "Impersonate-User": user,
        "Content-Type": "application/merge-patch+json",
    }
    async with httpx.AsyncClient(verify=context) as client:
        return await client.patch(server + path, headers=headers, json=body)


def cells(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each row of a table as {column name: cell}."""
    names = [column["name"] for column in document["columnDefinitions"]]
    return [dict(zip(names, row["cells"], strict=True)) for row in document["rows"]]


async def kubeconfig_for_account(
    kube: AsyncClient, *, admin_kubeconfig: Path, namespace: str, name: str, folder: Path
) -> Path:
    """A kubeconfig with a token of an existing service account (the TokenRequest API)."""
    meta = ObjectMeta(name=name, namespace=namespace)
    request = ServiceAccountToken(metadata=meta, spec=TokenRequestSpec(audiences=[], expirationSeconds=3600))
    answer = await kube.create(request, name, namespace=namespace)
    assert answer.status is not None
    config = yaml.safe_load(await asyncio.to_thread(admin_kubeconfig.read_text))
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    own = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": answer.status.token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    }
    path = folder / f"kubeconfig-{namespace}-{name}"
    await asyncio.to_thread(path.write_text, yaml.safe_dump(own))
    return path
