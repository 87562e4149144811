"""The bridge between rollout's custom resources and Kafka, on the real apiserver and broker.

Ids are derived from the object (uid and generation) and the bridge records the generation it
published in the object's status, so a restart or a re-list publishes nothing twice; the progress
stream lands in the rollout resources' status (server-side apply of the status subresource); the
planner's refusal of a sequence (SEQ-7, OPS-3) shows as a condition; a gate that starts waiting
gets an approval object, whose approval is published once and answered in its status (CHK-1); a
second replica stands by behind the Lease and takes over when the first stops.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from bridge_harness import Started, bridge_settings, cells, eventually, everything_on, running, table
from lightkube import ApiError, AsyncClient
from lightkube.generic_resource import GenericNamespacedResource
from lightkube.resources.coordination_v1 import Lease
from lightkube.types import PatchType
from rollout_crd_install import installed_rollout_crds

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.kube_bridge.resources import UpgradeApproval, UpgradeRelease, UpgradeRollout, UpgradeSequence
from rollout_adapters.kube_bridge.serve import Role
from rollout_common import envelope
from rollout_common.commands import CommandAck, RolloutTransition, StageTransition, Wait, WaitChanged
from rollout_common.events import OperatorCommand, ReleaseTarget, SequenceChange
from rollout_common.gates import GatePosition
from rollout_common.status import RolloutState, StageState, Track
from rollout_common.topics.catalog import OPERATOR_COMMANDS, PROGRESS, RELEASE_TARGETS

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.integration]

SEQUENCE = {
    "name": "main",
    "channel": "stable",
    "stages": [
        {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1h"},
        {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "upstream": "canary"},
    ],
}


async def _make(kube: AsyncClient, kind: type[GenericNamespacedResource], namespace: str, spec: Any) -> Any:
    obj = kind(metadata={"name": f"o-{uuid.uuid4().hex[:6]}", "namespace": namespace}, spec=spec)
    return await kube.create(obj)


async def _published(kube: AsyncClient, kind: type[GenericNamespacedResource], obj: Any, generation: int) -> Any:
    async def probe() -> Any:
        now = await kube.get(kind, obj.metadata.name, namespace=obj.metadata.namespace)
        return now if (now.status or {}).get("publishedGeneration") == generation else None

    return await eventually(probe, what=f"{obj.metadata.name} published at generation {generation}")


@pytest.fixture
async def bus(kafka_bootstrap: str, topic_prefix: str) -> Any:
    bus = KafkaBus(kafka_bootstrap, client_id=f"{topic_prefix}reader")
    try:
        yield bus
    finally:
        await bus.close()


async def test_restart_and_relist_publish_nothing_twice(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, topic_prefix: str, bus: KafkaBus
) -> None:
    """BUS-3 / SEQ-7 / START-1: each generation of each object is published once, under an id of
    its uid and generation, across a restart, a full re-list and status-only or metadata-only changes."""
    installed_rollout_crds(kubeconfig)
    settings = bridge_settings(
        kubeconfig=kubeconfig, namespace=namespace, prefix=topic_prefix, bootstrap=kafka_bootstrap, name="first"
    )
    sequence = await _make(kube, UpgradeSequence, namespace, SEQUENCE)
    release = await _make(kube, UpgradeRelease, namespace, {"channel": "stable", "targets": {"1.30": "1.31.2"}})
    async with running(settings) as (replica, _):
        await _published(kube, UpgradeSequence, sequence, 1)
        await _published(kube, UpgradeRelease, release, 1)
        assert replica.bridge is not None and replica.bridge.published == 2
    # A restart lists everything again: nothing is published, then a change is published once.
    restarted = settings.model_copy(update={"identity": "second"})
    async with running(restarted) as (replica, _):
        await eventually(lambda: _synced(replica), what="the restarted bridge listed every kind")
        await kube.patch(
            UpgradeSequence, sequence.metadata.name, {"metadata": {"labels": {"team": "a"}}},
            namespace=namespace, patch_type=PatchType.MERGE,
        )  # fmt: skip
        changed = {**SEQUENCE, "channel": "rapid"}
        await kube.patch(
            UpgradeSequence, sequence.metadata.name, {"spec": changed}, namespace=namespace, patch_type=PatchType.MERGE
        )
        await _published(kube, UpgradeSequence, sequence, 2)
        # Deleted and made again under the same name: a new object (uid), published once.
        await kube.delete(UpgradeRelease, release.metadata.name, namespace=namespace)
        again = await kube.create(
            UpgradeRelease(metadata={"name": release.metadata.name, "namespace": namespace}, spec=release.spec)
        )
        await _published(kube, UpgradeRelease, again, 1)
        assert replica.bridge is not None and replica.bridge.published == 2
    commands = await everything_on(bus, OPERATOR_COMMANDS, prefix=topic_prefix)
    uid = sequence.metadata.uid
    assert [event_id for event_id, _ in commands] == [f"k8s/sequence/{uid}/1", f"k8s/sequence/{uid}/2"]
    assert all(isinstance(model, SequenceChange) for _, model in commands)
    assert [model.sequence.channel for _, model in commands] == ["stable", "rapid"]
    assert commands[0][1].issued_by == f"kubernetes:{namespace}/sequence/{sequence.metadata.name}"
    releases = await everything_on(bus, RELEASE_TARGETS, prefix=topic_prefix)
    assert [(event_id, type(model)) for event_id, model in releases] == [
        (f"k8s/release/{release.metadata.uid}/1", ReleaseTarget),
        (f"k8s/release/{again.metadata.uid}/1", ReleaseTarget),
    ]
    assert releases[0][1].targets == {"1.30": "1.31.2"}


async def _synced(replica: Any) -> bool | None:
    return True if replica.bridge is not None and replica.bridge.synced.is_set() else None


async def _publish_progress(bus: KafkaBus, prefix: str, *models: Any) -> None:
    for index, model in enumerate(models):
        value, headers = envelope.encode(model, event_id=f"p-{uuid.uuid4().hex}-{index}", source="planner", at=0.0)
        await bus.publish(prefix + PROGRESS.name, key=PROGRESS.key(model).encode(), value=value, headers=headers)


async def test_progress_lands_in_status_and_a_refusal_is_a_condition(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, topic_prefix: str, bus: KafkaBus
) -> None:
    """STAT-5: the rollout resource the bridge makes shows stage, state and why it waits in the
    printer columns (the API's table output); OPS-3 / SEQ-7: a refused sequence shows the planner's
    reason; OPS-1: setting spec.paused publishes one pause command under the object's id."""
    installed_rollout_crds(kubeconfig)
    settings = bridge_settings(
        kubeconfig=kubeconfig, namespace=namespace, prefix=topic_prefix, bootstrap=kafka_bootstrap, name="only"
    )
    sequence = await _make(kube, UpgradeSequence, namespace, SEQUENCE)
    async with running(settings) as (replica, _):
        await _published(kube, UpgradeSequence, sequence, 1)
        refusal = "stage 'prod' would drop 3 clusters mid-rollout (SEQ-7)"
        await _publish_progress(
            bus,
            topic_prefix,
            CommandAck(command_id=f"k8s/sequence/{sequence.metadata.uid}/1", accepted=False, reason=refusal),
            RolloutTransition(rollout_id="main-1", state=RolloutState.RUNNING, reason="started by event r-1"),
            StageTransition(
                rollout_id="main-1", stage="canary", track=Track.CONTROL_PLANE, state=StageState.IN_PROGRESS,
                version="1.31.2", reason="VERSION_ARRIVED",
            ),
            WaitChanged(
                rollout_id="main-1", stage="canary", track=Track.CONTROL_PLANE,
                waits=(Wait(rule="WIN", message="2 cluster(s) outside their maintenance window"),),
            ),
        )  # fmt: skip

        async def refused() -> Any:
            now = await kube.get(UpgradeSequence, sequence.metadata.name, namespace=namespace)
            conditions = (now.status or {}).get("conditions") or []
            return conditions[0] if conditions and conditions[0]["status"] == "False" else None

        condition = await refused_condition(refused)
        assert (condition["type"], condition["reason"], condition["message"]) == ("Accepted", "Refused", refusal)

        async def row() -> Any:
            rows = cells(await table(kubeconfig, f"/apis/rollout.dev/v1alpha1/namespaces/{namespace}/upgraderollouts"))
            return rows[0] if rows and rows[0]["Waiting"] else None

        shown = await eventually(row, what="the rollout resource with a waiting reason")
        assert {k: shown[k] for k in ("Name", "Version", "Stage", "State", "Waiting")} == {
            "Name": "main-1",
            "Version": "1.31.2",
            "Stage": "canary",
            "State": "RUNNING",
            "Waiting": "WIN: 2 cluster(s) outside their maintenance window",
        }
        rollout = await kube.get(UpgradeRollout, "main-1", namespace=namespace)
        assert rollout.spec == {"rolloutId": "main-1"}
        await kube.patch(
            UpgradeRollout, "main-1", {"spec": {"paused": True}}, namespace=namespace, patch_type=PatchType.MERGE
        )
        await _published(kube, UpgradeRollout, rollout, 2)
        assert replica.bridge is not None
    commands = await everything_on(bus, OPERATOR_COMMANDS, prefix=topic_prefix)
    pauses = [(event_id, model) for event_id, model in commands if isinstance(model, OperatorCommand)]
    assert [(event_id, model.action, model.rollout_id) for event_id, model in pauses] == [
        (f"k8s/rollout/{rollout.metadata.uid}/2/pause", "pause", "main-1")
    ]


WAITING_BEFORE = (
    "the version reached the stage; it starts once approved: the before approval of stage prod, "
    "waiting since 2026-12-02T08:00:00+00:00 (CHK-1)"
)


def _awaiting(track: Track, stage: str, gate: GatePosition, reason: str = WAITING_BEFORE) -> StageTransition:
    return StageTransition(
        rollout_id="main-1", stage=stage, track=track, state=StageState.AWAITING_APPROVAL, version="1.31.2",
        reason=reason, gate=gate,
    )  # fmt: skip


async def _condition(kube: AsyncClient, namespace: str, name: str, reason: str) -> Any:
    async def probe() -> Any:
        try:
            now = await kube.get(UpgradeApproval, name, namespace=namespace)
        except ApiError:
            return None
        found = [c for c in (now.status or {}).get("conditions") or [] if c["reason"] == reason]
        return (now, found[0]) if found else None

    return await eventually(probe, what=f"approval {name} with condition reason {reason}")


async def test_a_waiting_gate_gets_an_approval_whose_approval_is_published_once_and_answered(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, topic_prefix: str, bus: KafkaBus
) -> None:
    """CHK-1: both tracks going AWAITING_APPROVAL at prod's `before` gate make one UpgradeApproval;
    the rollout's Waiting column names the gate (STAT-5); approving it by its spec publishes one
    `approve` command under an id of its uid and generation, across a restart and a redelivered
    transition (BUS-3); the planner's answers land in its status (OPS-3): accepted, then
    ALREADY_APPROVED, and a refusal with the planner's reason on another gate; a cancelled
    rollout's approval not given says its gate no longer waits."""
    installed_rollout_crds(kubeconfig)
    settings = bridge_settings(
        kubeconfig=kubeconfig, namespace=namespace, prefix=topic_prefix, bootstrap=kafka_bootstrap, name="first"
    )
    waiting = (
        _awaiting(Track.CONTROL_PLANE, "prod", GatePosition.BEFORE),
        _awaiting(Track.NODES, "prod", GatePosition.BEFORE),
    )
    async with running(settings) as (replica, _):
        await eventually(lambda: _synced(replica), what="the bridge made its topics and listed every kind")
        await _publish_progress(bus, topic_prefix, *waiting)
        made, pending = await _condition(kube, namespace, "main-1-prod-before", "Waiting")
        assert made.spec == {"rolloutId": "main-1", "stage": "prod", "gate": "before"}
        assert (pending["status"], pending["message"]) == (
            "Unknown",
            "the gate waits: set spec.approved to true (and approvedBy) to open it",
        )
        rows = cells(await table(kubeconfig, f"/apis/rollout.dev/v1alpha1/namespaces/{namespace}/upgraderollouts"))
        assert [(r["Name"], r["Stage"], r["Waiting"]) for r in rows] == [("main-1", "prod", f"CHK-1: {WAITING_BEFORE}")]
        await kube.patch(
            UpgradeApproval, made.metadata.name,
            {"spec": {"approved": True, "approvedBy": "alice", "comment": "change 42 reviewed"}},
            namespace=namespace, patch_type=PatchType.MERGE,
        )  # fmt: skip
        approved = await _published(kube, UpgradeApproval, made, 2)
        command_id = f"k8s/approval/{made.metadata.uid}/2/approve"
        assert approved.status["eventId"] == command_id
        assert replica.bridge is not None and replica.bridge.published == 1
        opened = "the before gate of stage prod approved by alice for main-1"
        await _publish_progress(bus, topic_prefix, CommandAck(command_id=command_id, accepted=True, reason=opened))
        _, accepted = await _condition(kube, namespace, made.metadata.name, "Accepted")
        assert (accepted["status"], accepted["message"], accepted["observedGeneration"]) == ("True", opened, 2)
        await _publish_progress(
            bus, topic_prefix, CommandAck(command_id=command_id, accepted=True, reason="ALREADY_APPROVED")
        )
        _, again = await _condition(kube, namespace, made.metadata.name, "AlreadyApproved")
        assert (again["status"], again["message"]) == ("True", "ALREADY_APPROVED")
    # A restart re-lists the approval and sees the transitions again: nothing is made or published.
    async with running(settings.model_copy(update={"identity": "second"})) as (replica, _):
        await eventually(lambda: _synced(replica), what="the restarted bridge listed every kind")
        await _publish_progress(bus, topic_prefix, *waiting)
        after = _awaiting(Track.NODES, "canary", GatePosition.AFTER, reason="soak ended (CHK-1)")
        await _publish_progress(bus, topic_prefix, after)
        other, _ = await _condition(kube, namespace, "main-1-canary-after", "Waiting")
        await kube.patch(
            UpgradeApproval, other.metadata.name, {"spec": {"approved": True, "approvedBy": "bob"}},
            namespace=namespace, patch_type=PatchType.MERGE,
        )  # fmt: skip
        await _published(kube, UpgradeApproval, other, 2)
        refusal = (
            "the after gate of stage canary is not waiting for main-1; a gate is approved only once reached (CHK-1)"
        )
        other_id = f"k8s/approval/{other.metadata.uid}/2/approve"
        await _publish_progress(bus, topic_prefix, CommandAck(command_id=other_id, accepted=False, reason=refusal))
        _, refused = await _condition(kube, namespace, other.metadata.name, "Refused")
        assert (refused["status"], refused["message"]) == ("False", refusal)
        # A rollout that ends leaves its approvals not given saying so; the ones given keep their answer.
        cancelled = StageTransition(
            rollout_id="main-2", stage="prod", track=Track.NODES, state=StageState.AWAITING_APPROVAL,
            reason="waits", gate=GatePosition.BEFORE,
        )  # fmt: skip
        await _publish_progress(bus, topic_prefix, cancelled)
        await _condition(kube, namespace, "main-2-prod-before", "Waiting")
        await _publish_progress(
            bus,
            topic_prefix,
            RolloutTransition(rollout_id="main-1", state=RolloutState.COMPLETED, reason="all stages complete"),
            RolloutTransition(rollout_id="main-2", state=RolloutState.CANCELLED, reason="cancelled by an operator"),
        )
        _, discarded = await _condition(kube, namespace, "main-2-prod-before", "Discarded")
        assert (discarded["status"], discarded["message"]) == (
            "False",
            "rollout main-2 is CANCELLED (cancelled by an operator); the gate no longer waits",
        )
        for name, reason in (("main-1-prod-before", "AlreadyApproved"), ("main-1-canary-after", "Refused")):
            kept = await kube.get(UpgradeApproval, name, namespace=namespace)
            assert [c["reason"] for c in kept.status["conditions"]] == [reason]
        assert replica.bridge is not None and replica.bridge.published == 1
    names = sorted([a.metadata.name async for a in kube.list(UpgradeApproval, namespace=namespace)])
    assert names == ["main-1-canary-after", "main-1-prod-before", "main-2-prod-before"]
    commands = await everything_on(bus, OPERATOR_COMMANDS, prefix=topic_prefix)
    # Keyed by event id: the two commands may sit on different partitions of the topic.
    approvals = {
        event_id: (m.action, m.rollout_id, m.stage, m.gate, m.issued_by, m.comment) for event_id, m in commands
    }
    assert len(commands) == 2
    assert approvals == {
        command_id: ("approve", "main-1", "prod", GatePosition.BEFORE, "alice", "change 42 reviewed"),
        other_id: ("approve", "main-1", "canary", GatePosition.AFTER, "bob", None),
    }


async def refused_condition(probe: Any) -> Any:
    return await eventually(probe, what="the sequence's Accepted condition is False")


async def test_a_second_replica_stands_by_and_takes_over(
    kube: AsyncClient, kubeconfig: Path, namespace: str, kafka_bootstrap: str, topic_prefix: str, bus: KafkaBus
) -> None:
    """Leader election: while the first replica holds the Lease the second publishes nothing and
    writes nothing; when the first stops, the second takes the Lease and publishes what is
    created after, once, and nothing the first published."""
    installed_rollout_crds(kubeconfig)
    first = bridge_settings(
        kubeconfig=kubeconfig, namespace=namespace, prefix=topic_prefix, bootstrap=kafka_bootstrap, name="replica-a"
    )
    release = await _make(kube, UpgradeRelease, namespace, {"version": "1.31.2", "tracks": ["nodes"]})
    a = Started(first)
    try:
        await _published(kube, UpgradeRelease, release, 1)
        b = Started(first.model_copy(update={"identity": "replica-b"}))
        try:
            # Three renewals of the leader's Lease later, the second replica still only waits.
            for _ in range(3):
                before = await _renew_time(kube, namespace)
                await eventually(lambda b=before: _renewed_since(kube, namespace, b), what="the leader renews")
            assert (a.replica.role, b.replica.role, b.replica.bridge) == (Role.LEADING, Role.STANDBY, None)
            assert await _holder(kube, namespace) == "replica-a"
            assert await a.stop() is True
            await eventually(lambda: _leading(b.replica), what="the second replica takes over")
            assert await _holder(kube, namespace) == "replica-b"
            later = await _make(kube, UpgradeRelease, namespace, {"version": "1.31.3"})
            await _published(kube, UpgradeRelease, later, 1)
            assert b.replica.bridge is not None and b.replica.bridge.published == 1
        finally:
            await b.stop()
    finally:
        if not a.task.done():
            await a.stop()
    releases = await everything_on(bus, RELEASE_TARGETS, prefix=topic_prefix)
    assert [event_id for event_id, _ in releases] == [
        f"k8s/release/{release.metadata.uid}/1",
        f"k8s/release/{later.metadata.uid}/1",
    ]


async def _leading(replica: Any) -> bool | None:
    return True if replica.role is Role.LEADING else None


async def _lease(kube: AsyncClient, namespace: str) -> Any:
    return await kube.get(Lease, "rollout-kube-bridge", namespace=namespace)


async def _holder(kube: AsyncClient, namespace: str) -> str | None:
    lease = await _lease(kube, namespace)
    return lease.spec.holderIdentity if lease.spec else None


async def _renew_time(kube: AsyncClient, namespace: str) -> Any:
    lease = await _lease(kube, namespace)
    return lease.spec.renewTime


async def _renewed_since(kube: AsyncClient, namespace: str, before: Any) -> bool | None:
    return True if await _renew_time(kube, namespace) != before else None
