"""`rollout approve` against a planner on the real Kafka and Redis (CHK-1, OPS-3): it waits for the
planner's acknowledgement and its exit code says what happened, and `rollout status` then says who
approved the gate, when and why (STAT-5)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from planner_harness import fleet, release, settings

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli.main import main
from rollout_common.sequence import Sequence as StageSequence
from rollout_common.status_words import clock_text
from rollout_common.topics import ALL
from rollout_planner.engine import EngineState, new_state
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.planner import Planner

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _gated() -> StageSequence:
    """The harness's two stages, canary behind a `before` approval."""
    return StageSequence.model_validate(
        {
            "name": "svc",
            "channel": "regular",
            "stages": [
                {
                    "name": "canary",
                    "clusterSelector": {"matchLabels": {"env": "canary"}},
                    "soak": "1d",
                    "approval": {"before": True},
                },
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
            ],
        }
    )


async def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


async def _status(capsys: pytest.CaptureFixture[str], common: list[str]) -> dict[str, Any]:
    code, out, _ = await _cli(capsys, "status", "--json", *common)
    return json.loads(out) if code == 0 else {}


def _canary(doc: dict[str, Any]) -> dict[str, Any]:
    stage: dict[str, Any] = next((s for s in doc.get("stages", []) if s["name"] == "canary"), {})
    return stage


@pytest.fixture
async def at_the_gate(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> AsyncIterator[list[str]]:
    """A planner whose rollout svc-1 waits AWAITING_APPROVAL at canary; yields the CLI's connection options."""
    prefix = topic_prefix + "."
    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    await bus.ensure_topics([t.spec(prefix) for t in ALL])

    async def initial() -> EngineState:
        return new_state(_gated(), fleet())

    planner = Planner(
        bus=bus, store=store, settings=settings(prefix), clock=ScaledClock(origin=time.time()), initial_state=initial
    )
    task = asyncio.create_task(planner.run())
    common = ["--bootstrap", kafka_bootstrap, "--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    try:
        await release(bus, prefix)
        async with asyncio.timeout(30):
            while True:  # the status document is the condition waited for: it is in Redis, not an event
                if _canary(await _status(capsys, common)).get("gates"):  # the gate was reached
                    break
                await asyncio.sleep(0.1)
        yield common
    finally:
        planner.stop()
        await task
        await bus.close()
        await store.close()


async def test_chk1_an_approval_waits_for_its_acknowledgement_then_a_second_one_is_already_approved(
    at_the_gate: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """OPS-3: exit 0 with the planner's words; the same approval again is accepted as ALREADY_APPROVED
    and changes nothing (BUS-3); status then shows the gate approved by alice with her comment."""
    doc = await _status(capsys, at_the_gate)
    assert _canary(doc)["tracks"]["controlPlane"]["state"] == "AWAITING_APPROVAL"
    argv = ["approve", "--rollout", "svc-1", "--stage", "canary", "--gate", "before", *at_the_gate]
    code, out, err = await _cli(capsys, *argv, "--by", "alice", "--comment", "CAB-42")
    assert (code, err) == (0, "")
    assert out.startswith("accepted: approve cmd-")
    assert out.endswith(
        ": the before gate of stage canary for rollout svc-1: the before gate of stage canary approved by alice "
        "for svc-1\n"
    )
    code, out, err = await _cli(capsys, *argv, "--by", "bob")
    assert (code, err) == (0, "")
    assert out.endswith(": the before gate of stage canary for rollout svc-1: ALREADY_APPROVED\n")

    doc = await _status(capsys, at_the_gate)
    (gate,) = _canary(doc)["gates"]
    said = (gate["rollout"], gate["gate"], gate["approvedBy"], gate["comment"])
    assert said == ("svc-1", "before", "alice", "CAB-42")
    code, out, _ = await _cli(capsys, "status", "--stage", "canary", *at_the_gate)
    lines = [" ".join(line.strip("│╭╮╰╯─ ").split()) for line in out.splitlines()]
    since, approved = clock_text(gate["waitingSince"]), clock_text(gate["approvedAt"])
    assert f"canary before svc-1 {since} approved by alice at {approved}: CAB-42" in lines
