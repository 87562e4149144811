"""The planner SIGKILLed while a stage soaks, then started again with the same settings (BUS-6).

Planner, two executors, a health reporter and the health monitor run as processes on the real
broker and Redis; the first stage soaks for 15 h of engine time (15 s of wall time at the
planner's time scale). As soon as an independent consumer of the progress topic sees the first
stage SOAKING, the planner is killed (no shutdown code runs) and started again with the same
environment. Then:

- it resumes from its snapshot: every stage and track completes, with the release's version;
- the soak ends on time: engine time keeps running while the planner is down (its clock origin
  is in Redis), so each COMPLETE's `ce_time` (engine time) is SOAKING's `ce_time` + the soak,
  late by at most what one wall second is worth at the time scale, and never early;
- no stage advance is decided or acted on twice: every cluster and track is in exactly one
  command, each command id on the topic repeats only as a byte-identical re-publication of the
  outbox, and each cluster and track is started and succeeds exactly once on upgrade-results.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from e2e_system import (
    Message,
    Pace,
    apply_fleet,
    publish_release,
    read_until,
    settled,
    staged_cluster_names,
    staged_fleet,
    start_system,
    wait_for_fleet,
    wait_for_status,
)
from service_processes import ServiceProcesses

from rollout_common.topics.catalog import PROGRESS, STAGE_ADVANCE, UPGRADE_RESULTS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"
STAGES = ("dev", "staging", "prod")
PER_STAGE = 4
TIME_SCALE = 3600.0  # engine seconds per wall second
# Soak per stage, in engine seconds. The first one is long enough in wall time (15 s) to kill the
# planner during it and have the new process running again well before it ends.
SOAK_S = {"dev": 15 * 3600.0, "staging": 3600.0, "prod": 3600.0}
# How late a soak may end, in engine time: a timer fires on the planner's next loop turn, and a
# turn busy with a batch (persist + publish) takes well under half a wall second.
LATE_TOLERANCE_S = 0.5 * TIME_SCALE
DOWN_S = 1.0  # how long the planner stays dead
COMPLETE_TIMEOUT_S = 120.0

PACE = Pace(time_scale=TIME_SCALE, upgrade_s=0.5, max_concurrent=2, ready_after_s=0.3)


def scenario_document() -> dict[str, Any]:
    soaks = {stage: f"{int(SOAK_S[stage])}s" for stage in STAGES}
    return staged_fleet(name="restart", stages=STAGES, per_stage=PER_STAGE, version=OLD, soak=soaks, max_new=2)


def cluster_names() -> list[str]:
    return staged_cluster_names(STAGES, PER_STAGE)


def wanted() -> set[tuple[str, str]]:
    return {(name, track) for name in cluster_names() for track in ("controlPlane", "nodes")}


async def redis_json(redis_url: str, key: str) -> Any:
    client = aioredis.Redis.from_url(redis_url)
    try:
        raw = await client.get(key)
    finally:
        await client.aclose()
    return None if raw is None else json.loads(raw)


def body(record: Message) -> dict[str, Any]:
    return json.loads(record.value)  # type: ignore[no-any-return]


def header(record: Message, name: str) -> str:
    return dict(record.headers)[name].decode()


def engine_time(record: Message) -> float:
    """`ce_time` of a planner message: the engine time of the decision that produced it."""
    return dt.datetime.fromisoformat(header(record, "ce_time")).timestamp()


def transitions(records: list[Message], state: str) -> dict[tuple[str, str], list[Message]]:
    """(stage, track) -> the distinct (by ce_id) stage transitions into `state`."""
    found: dict[tuple[str, str], dict[str, Message]] = defaultdict(dict)
    for record in records:
        event = body(record)
        if event["kind"] == "stage_transition" and event["state"] == state:
            found[(event["stage"], event["track"])].setdefault(header(record, "ce_id"), record)
    return {key: list(by_id.values()) for key, by_id in found.items()}


def every_track_complete(records: list[Message]) -> bool:
    return len(transitions(records, "COMPLETE")) == len(STAGES) * 2


def rollouts_completed(status: dict[str, Any]) -> bool:
    return [rollout["state"] for rollout in status["rollouts"]] == ["COMPLETED"]


def first_stage_soaking(records: list[Message]) -> bool:
    return any(stage == STAGES[0] for stage, _ in transitions(records, "SOAKING"))


async def whole_topic(
    kafka_bootstrap: str, prefix: str, topic: str, partitions: int, done: Callable[[list[Message]], bool]
) -> list[Message]:
    """Every record, once `done` holds and the services have handled all their input since, so
    that a wrongly repeated message would show up too."""
    await read_until(kafka_bootstrap, prefix + topic, partitions, done, timeout_s=60)
    await settled(kafka_bootstrap, prefix)
    return await read_until(kafka_bootstrap, prefix + topic, partitions, done, timeout_s=60)


def assert_advances_decided_once(records: list[Message]) -> None:
    by_id: dict[str, set[tuple[bytes, tuple[tuple[str, bytes], ...]]]] = defaultdict(set)
    commands: dict[tuple[str, str], set[str]] = defaultdict(set)
    for record in records:
        ce_id = header(record, "ce_id")
        by_id[ce_id].add((record.value, tuple(record.headers)))
        event = body(record)
        assert event["commandId"] == ce_id
        assert len(event["clusters"]) <= 2, f"{ce_id} breaches maxNew: {event['clusters']}"
        for cluster in event["clusters"]:
            commands[(cluster, event["track"])].add(ce_id)
    # A command id repeats only as the outbox published again after the kill, byte for byte.
    assert {ce_id: len(copies) for ce_id, copies in by_id.items() if len(copies) > 1} == {}
    assert set(commands) == wanted()
    assert {key: ids for key, ids in commands.items() if len(ids) > 1} == {}, "a cluster in two commands"


def assert_upgraded_once(records: list[Message]) -> None:
    """Each cluster and track started once and succeeded once (executors re-publish a recorded
    result under the same event id, so successes count by id)."""
    succeeded: dict[tuple[str, str], set[str]] = defaultdict(set)
    started: Counter[tuple[str, str]] = Counter()
    for record in records:
        event = body(record)
        key = (event["cluster"], event["track"])
        assert event["version"] == NEW
        assert event["outcome"] != "failed", event
        if event["outcome"] == "succeeded":
            succeeded[key].add(header(record, "ce_id"))
        elif event["outcome"] == "started":
            started[key] += 1
    assert set(succeeded) == wanted(), f"missing: {sorted(wanted() - set(succeeded))}"
    assert {key: ids for key, ids in succeeded.items() if len(ids) > 1} == {}, "upgraded more than once"
    assert {key: n for key, n in started.items() if n != 1} == {}, "an upgrade started more than once"


async def test_planner_killed_during_a_soak_resumes_and_ends_the_soak_on_time(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str, services: ServiceProcesses
) -> None:
    apply_fleet(
        scenario_document(), tmp_path=tmp_path, prefix=prefix, kafka_bootstrap=kafka_bootstrap, redis_url=redis_url
    )
    start_system(services, prefix=prefix, clusters=cluster_names(), pace=PACE)
    await wait_for_fleet(redis_url, prefix, services, clusters=len(cluster_names()))
    await publish_release(kafka_bootstrap, prefix, event_id="rel-restart", targets={"1.30": NEW})
    progress_topic = prefix + PROGRESS.name

    try:
        await read_until(kafka_bootstrap, progress_topic, PROGRESS.partitions, first_stage_soaking, timeout_s=60)
    except TimeoutError:
        pytest.fail(f"the first stage never soaked; planner log:\n{services.log_tail('planner')}")
    before_kill = await redis_json(redis_url, f"{prefix}:status")
    killed_at = time.time()
    services.kill("planner")
    await asyncio.sleep(DOWN_S)
    services.restart("planner")
    restarted_at = time.time()

    def watch(records: list[Message]) -> None:
        crashed = {name: code for name, code in services.exited().items()}
        assert not crashed, f"exited: {crashed}\n" + "\n".join(services.log_tail(n) for n in crashed)

    try:
        progress = await read_until(
            kafka_bootstrap,
            progress_topic,
            PROGRESS.partitions,
            every_track_complete,
            timeout_s=COMPLETE_TIMEOUT_S,
            on_poll=watch,
        )
    except TimeoutError:
        pytest.fail(f"not complete in {COMPLETE_TIMEOUT_S}s; planner log:\n{services.log_tail('planner', 6000)}")

    # It resumed from its snapshot rather than starting over. The status document is written after
    # the batch's messages are published, so the progress topic may show the last COMPLETE first.
    try:
        after = await wait_for_status(redis_url, prefix, services, until=rollouts_completed, timeout_s=30)
    except TimeoutError:
        pytest.fail(f"the status never said COMPLETED: {await redis_json(redis_url, f'{prefix}:status')}")
    assert after["clusters"] == len(cluster_names())
    assert after["batch"] > before_kill["batch"]

    # Every stage and track completed, once, with the release's version.
    complete = transitions(progress, "COMPLETE")
    soaking = transitions(progress, "SOAKING")
    assert {key: [body(r)["version"] for r in rs] for key, rs in complete.items()} == {
        (stage, track): [NEW] for stage in STAGES for track in ("controlPlane", "nodes")
    }
    assert {key: len(rs) for key, rs in soaking.items() if len(rs) != 1} == {}, "a soak started twice"

    # The kill fell inside the first stage's soak: engine time at the kill, from the planner's
    # stored clock origin, lies between its SOAKING and its COMPLETE.
    origin = float(await redis_json(redis_url, f"{prefix}:planner/clock-origin"))
    killed_engine = origin + (killed_at - origin) * TIME_SCALE
    restarted_engine = origin + (restarted_at - origin) * TIME_SCALE
    first = [(stage, track) for stage, track in soaking if stage == STAGES[0]]
    assert any(engine_time(soaking[key][0]) < killed_engine < engine_time(complete[key][0]) for key in first)

    lateness: dict[tuple[str, str], float] = {}
    for key, (soak_record,) in soaking.items():
        started, soak = engine_time(soak_record), SOAK_S[key[0]]
        assert body(soak_record)["until"] == pytest.approx(started + soak, abs=1e-3)
        lateness[key] = engine_time(complete[key][0]) - (started + soak)
    print(
        f"planner down {killed_engine:.0f}..{restarted_engine:.0f} (engine s); "
        f"soak ended late by (engine s): { {f'{s}/{t}': round(v, 1) for (s, t), v in lateness.items()} }"
    )
    assert {key: v for key, v in lateness.items() if not 0 <= v <= LATE_TOLERANCE_S} == {}, (
        f"a soak did not end on time (tolerance {LATE_TOLERANCE_S:.0f} engine s)"
    )

    advances = await whole_topic(
        kafka_bootstrap,
        prefix,
        STAGE_ADVANCE.name,
        STAGE_ADVANCE.partitions,
        lambda rs: sum(len(body(r)["clusters"]) for r in rs) >= len(wanted()),
    )
    assert_advances_decided_once(advances)
    results = await whole_topic(
        kafka_bootstrap,
        prefix,
        UPGRADE_RESULTS.name,
        UPGRADE_RESULTS.partitions,
        lambda rs: sum(body(r)["outcome"] == "succeeded" for r in rs) >= len(wanted()),
    )
    assert_upgraded_once(results)
