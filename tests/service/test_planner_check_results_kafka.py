"""CHK-2 through the real broker and Redis: the planner announces a check's series on the progress
topic and holds the stage's first batch until a passed result arrives on rollout.check-results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from planner_harness import NEW, OLD, START, publish, release, settings
from topic_reader import Message, bodies, read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_common.check_results import CheckResult
from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_common.topics import ALL
from rollout_common.topics.catalog import CHECK_RESULTS, PROGRESS, STAGE_ADVANCE
from rollout_planner.engine import EngineState, new_state
from rollout_planner.service.clock import ManualClock
from rollout_planner.service.planner import Planner

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

CHECKED = Sequence.model_validate(
    {
        "name": "svc",
        "channel": "regular",
        "stages": [
            {
                "name": "canary",
                "clusterSelector": {"matchLabels": {"env": "canary"}},
                "soak": "1d",
                "checks": [
                    {
                        "name": "errors",
                        "query": "error_ratio",
                        "successCondition": "result < 0.01",
                        "interval": "5m",
                        "phases": ["progress"],
                    }
                ],
            }
        ],
    }
)


@pytest.fixture
async def bus(kafka_bootstrap: str, topic_prefix: str) -> AsyncIterator[KafkaBus]:
    made = KafkaBus(kafka_bootstrap, client_id=f"{topic_prefix}.test")
    await made.ensure_topics([topic.spec(topic_prefix + ".") for topic in ALL])
    yield made
    await made.close()


def _series_started(records: list[Message]) -> bool:
    return any(b.get("kind") == "check_series" and b.get("running") for b in bodies(records))


async def test_chk_2_series_on_progress_and_a_passed_result_on_check_results_opens_the_batch(
    kafka_bootstrap: str, redis_url: str, topic_prefix: str, bus: KafkaBus
) -> None:
    prefix = topic_prefix + "."

    async def initial() -> EngineState:
        return new_state(CHECKED, [Cluster(name="can-1", labels={"env": "canary"}, version=OLD)])

    planner_bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    planner = Planner(
        bus=planner_bus, store=store, settings=settings(prefix), clock=ManualClock(START), initial_state=initial
    )
    task = asyncio.create_task(planner.run())
    try:
        await release(bus, prefix)
        progress = await read_topic(kafka_bootstrap, prefix + PROGRESS.name, until=_series_started)
        [series] = [b for b in bodies(progress) if b.get("kind") == "check_series"]
        assert series == {
            "kind": "check_series",
            "rolloutId": "svc-1",
            "stage": "canary",
            "check": "errors",
            "running": True,
            "since": START,
            "interval": 300.0,
        }
        # the batch waits for a passed result: the wait on the progress topic names the check
        waits = [b for b in bodies(progress) if b.get("kind") == "wait_changed" and b["track"] == "controlPlane"]
        assert [w["rule"] for w in waits[-1]["waits"]] == ["CHK-2"]
        result = CheckResult(
            rollout_id="svc-1",
            stage="canary",
            check="errors",
            observed_at=START,
            value=0.002,
            outcome="passed",
            reason="0.002: successCondition result < 0.01 holds",
        )
        await publish(bus, prefix, CHECK_RESULTS, result, event_id="check-1")
        [batch] = await read_topic(kafka_bootstrap, prefix + STAGE_ADVANCE.name, until=lambda rs: len(rs) >= 1)
        body = json.loads(batch.value)
        assert (body["stage"], body["track"], body["version"], body["clusters"]) == (
            "canary",
            "controlPlane",
            NEW,
            ["can-1"],
        )
    finally:
        planner.stop()
        await asyncio.wait_for(task, 30)
        await planner_bus.close()
        await store.close()
