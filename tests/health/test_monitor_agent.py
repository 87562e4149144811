"""The monitor's faust agent and staleness timer, run in faust's test context (no broker)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP

from rollout_common.commands import Notice, StageAdvance
from rollout_common.envelope import decode, encode
from rollout_common.events import Readiness, StartRollout, UpgradeResult
from rollout_common.fleet import Cluster
from rollout_common.heartbeat import Heartbeat
from rollout_common.sequence import Sequence
from rollout_common.status import ClusterStatus, Track
from rollout_common.topics.catalog import DEAD_LETTER, READINESS
from rollout_health.monitor import HealthMonitor
from rollout_health.settings import MonitorSettings
from rollout_planner.engine import decide, new_state
from rollout_planner.engine.views import track_status

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")


class RecordingOutbox:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes, dict[str, bytes]]] = []
        self.hold = False
        self.held: list[asyncio.Future[Any]] = []

    async def send(self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]) -> None:
        self.sent.append((topic, key, value, dict(headers)))

    async def send_soon(
        self, topic: str, *, key: bytes | None, value: bytes, headers: Mapping[str, bytes]
    ) -> asyncio.Future[Any]:
        """Recorded at once; the acknowledgement is the test's to give (`ack`), or given at once."""
        self.sent.append((topic, key, value, dict(headers)))
        delivery: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.hold:
            self.held.append(delivery)
        else:
            delivery.set_result(None)
        return delivery

    def readiness(self) -> list[tuple[str, bool, str | None]]:
        found = []
        for topic, _, value, headers in self.sent:
            if topic == READINESS.name:
                _, message = decode(value, headers, READINESS.models)
                assert isinstance(message, Readiness)
                found.append((message.cluster, message.ready, message.reason))
        return found


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def outbox() -> RecordingOutbox:
    return RecordingOutbox()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1000.0)


@contextlib.contextmanager
def running_monitor(settings: MonitorSettings, outbox: RecordingOutbox, clock: FakeClock) -> Iterator[HealthMonitor]:
    """A monitor whose agent a test can feed through `raw_channel`, its consumer's loop closed after."""
    made = HealthMonitor(settings, outbox=outbox, clock=clock)
    made.app.finalize()
    made.app.flow_control.resume()
    try:
        yield made
    finally:
        # A stream touches `app.consumer`, whose (never started) consumer thread made an event loop
        # of its own; nothing else closes it in a test, and an unclosed loop fails the suite.
        consumer = made.app._consumer
        if consumer is not None:
            consumer._thread.thread_loop.close()


def raw_channel(monitor: HealthMonitor) -> faust.ChannelT[Any]:
    """A channel that hands the agent each record's bytes as they are, like the heartbeat topic."""
    return monitor.app.channel(schema=faust.Schema(key_serializer="raw", value_serializer="raw"))


@pytest.fixture
async def monitor(outbox: RecordingOutbox, clock: FakeClock) -> AsyncIterator[HealthMonitor]:
    # repeats off: these tests count changes; the repeat has its own test
    with running_monitor(MonitorSettings(staleness_limit_s=30, republish_interval_s=0), outbox, clock) as made:
        yield made


def _heartbeat(cluster: str, ready: bool, at: float = 1000.0) -> tuple[bytes, dict[str, bytes]]:
    """A heartbeat observed at `at` (the monitor's clock starts at 1000)."""
    return encode(Heartbeat(cluster=cluster, ready=ready, observed_at=at), event_id="x", source="test", at=at)


async def test_only_changes_are_published(monitor: HealthMonitor, outbox: RecordingOutbox) -> None:
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        for at, (cluster, ready) in enumerate([("c1", True), ("c1", True), ("c2", False), ("c1", False)]):
            value, headers = _heartbeat(cluster, ready, 1000.0 + at)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=1000.0 + at)
    assert outbox.readiness() == [
        ("c1", True, "reported ready"),
        ("c2", False, "reported not ready"),
        ("c1", False, "reported not ready"),
    ]
    assert monitor.table["c1"]["last_published"] is False
    assert _sample(monitor, "rollout_health_readiness_changes_total", ready="true") == 1
    assert _sample(monitor, "rollout_health_readiness_changes_total", ready="false") == 2


async def test_a_silent_cluster_is_marked_stale_once_then_recovers(
    monitor: HealthMonitor, outbox: RecordingOutbox, clock: FakeClock
) -> None:
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        for cluster, at in (("c1", 1000.0), ("c2", 1025.0)):
            value, headers = _heartbeat(cluster, True, at)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=at)
        clock.now = 1040.0
        stale = await monitor.check_staleness()
        assert [(r.cluster, r.ready, r.reason) for r in stale] == [("c1", False, "stale: no heartbeat for 40 s")]
        assert await monitor.check_staleness() == []  # announced once
        value, headers = _heartbeat("c1", True, 1041.0)
        await agent.put(value, key=b"c1", headers=headers, timestamp=1041.0)
    assert outbox.readiness()[-2:] == [("c1", False, "stale: no heartbeat for 40 s"), ("c1", True, "reported ready")]
    assert _sample(monitor, "rollout_health_stale_marks_total") == 1


async def test_a_bad_heartbeat_is_dead_lettered_and_the_agent_goes_on(
    monitor: HealthMonitor, outbox: RecordingOutbox
) -> None:
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        await agent.put(b"\xff not json", key=b"c1", headers={"ce_specversion": b"1.0"})
        value, headers = _heartbeat("c1", True)
        await agent.put(value, key=b"c1", headers=headers, timestamp=1000.0)
    [(_, key, value, headers)] = [sent for sent in outbox.sent if sent[0] == DEAD_LETTER.name]
    assert (key, value) == (b"c1", b"\xff not json")
    assert headers["dlq_reason"].startswith(b"missing CloudEvents header")
    assert headers["dlq_source"].startswith(b"rollout-health/")
    assert outbox.readiness() == [("c1", True, "reported ready")]
    topic = monitor.heartbeats.get_topic_name()
    assert _sample(monitor, "rollout_dead_letters_total", topic=topic, reason_kind="bad_headers") == 1


def _sample(monitor: HealthMonitor, name: str, **labels: str) -> float | None:
    value = monitor.metrics.registry.get_sample_value(name, labels)
    return value


async def test_readiness_is_said_again_each_republish_interval_without_a_change(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """A ready the planner applied before the upgrade it follows is repaired by the next repeat."""
    settings = MonitorSettings(staleness_limit_s=30, check_interval_s=5, republish_interval_s=5)
    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        async with made.agent.test_context(channel=raw) as agent:
            for cluster, ready in (("c1", True), ("c2", False)):
                value, headers = _heartbeat(cluster, ready)
                await agent.put(value, key=cluster.encode(), headers=headers, timestamp=1000.0)
            clock.now = 1010.0
            again = await made.check_staleness()
        assert sorted((r.cluster, r.ready, r.reason) for r in again) == [
            ("c1", True, "unchanged"),
            ("c2", False, "unchanged"),
        ]
        # repeats are not changes
        assert _sample(made, "rollout_health_readiness_changes_total", ready="true") == 1


async def test_bus_7_a_repeat_carries_the_newest_agreeing_observation(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """BUS-7: a cluster that stayed ready through an upgrade is said ready again with the time of its
    newest heartbeat, not of its last change, so a planner waiting for an observation after the
    upgrade's result counts it ready; a stale mark keeps the time of the silence."""
    settings = MonitorSettings(staleness_limit_s=30, check_interval_s=5, republish_interval_s=5)
    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        async with made.agent.test_context(channel=raw) as agent:
            for at in (1000.0, 1004.0, 1008.0):  # ready all along: one change, at 1000
                value, headers = _heartbeat("c1", True, at)
                await agent.put(value, key=b"c1", headers=headers, timestamp=at)
            clock.now = 1010.0
            again = await made.check_staleness()
        assert [(r.cluster, r.ready, r.reason, r.observed_at) for r in again] == [("c1", True, "unchanged", 1008.0)]


async def test_readiness_carries_the_heartbeats_observation_time(
    monitor: HealthMonitor, outbox: RecordingOutbox
) -> None:
    """BUS-7: the time a cluster was observed, not the time the record arrived, travels on."""
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        value, headers = _heartbeat("c1", True, 990.5)
        await agent.put(value, key=b"c1", headers=headers, timestamp=1000.0)
    [(_, _, body, sent_headers)] = [sent for sent in outbox.sent if sent[0] == READINESS.name]
    _, readiness = decode(body, sent_headers, READINESS.models)
    assert isinstance(readiness, Readiness) and readiness.observed_at == 990.5
    assert monitor.table["c1"]["published_observed_at"] == 990.5


async def test_a_heartbeat_stamped_beyond_the_future_bound_is_dead_lettered(
    monitor: HealthMonitor, outbox: RecordingOutbox
) -> None:
    """BUS-7: 31 s ahead of the monitor's clock is refused (bound 30 s by default), 29 s accepted:
    a heartbeat from the future would keep its cluster from ever going stale."""
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        for cluster, at in (("c1", 1031.0), ("c2", 1029.0)):
            value, headers = _heartbeat(cluster, True, at)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=1000.0)
    [(_, key, _, headers)] = [sent for sent in outbox.sent if sent[0] == DEAD_LETTER.name]
    assert key == b"c1"
    assert headers["dlq_reason"] == (
        b"invalid Heartbeat: observedAt is 31 s ahead of the monitor's clock (limit max_future_skew_s=30); "
        b"check the reporter's clock"
    )
    assert outbox.readiness() == [("c2", True, "reported ready")]
    assert "c1" not in monitor.table


async def test_staleness_counts_from_the_observation(
    monitor: HealthMonitor, outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """BUS-7: a heartbeat observed at 1000 but delivered at 1039 is 40 s old at 1040 (limit 30)."""
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        value, headers = _heartbeat("c1", True, 1000.0)
        await agent.put(value, key=b"c1", headers=headers, timestamp=1039.0)
        clock.now = 1040.0
        [stale] = await monitor.check_staleness()
    assert (stale.cluster, stale.ready, stale.reason, stale.observed_at) == (
        "c1",
        False,
        "stale: no heartbeat for 40 s",
        1040.0,
    )


async def test_the_planner_flags_an_upgrade_the_cluster_does_not_report_through_the_monitor(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """GATE-1/GATE-2, STAT-1 (NOT_READY, VERSION_MISMATCH), BUS-7: the versions a Kubernetes probe
    reads travel heartbeat -> monitor -> readiness -> planner. A heartbeat whose only news is another
    version is published (the cluster stayed ready through its upgrade); the repeat carries the
    versions too; the engine, given what the monitor published, flags the cluster whose control-plane
    upgrade to 1.31.2 succeeded while its API server still says v1.30.5, and counts it done once it
    says v1.31.2."""
    settings = MonitorSettings(staleness_limit_s=30, check_interval_s=5, republish_interval_s=5)

    def versioned(at: float, cp: str, nodes: str = "v1.30.5") -> tuple[bytes, dict[str, bytes]]:
        beat = Heartbeat(cluster="c1", ready=True, observed_at=at, control_plane_version=cp, node_version=nodes)
        return encode(beat, event_id=f"hb-{at}", source="test", at=at)

    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        async with made.agent.test_context(channel=raw) as agent:
            for at, cp in ((1000.0, "v1.30.5"), (1002.0, "v1.30.5"), (1006.0, "v1.30.5"), (1008.0, "v1.31.2")):
                value, headers = versioned(at, cp)
                await agent.put(value, key=b"c1", headers=headers, timestamp=at)
                if at == 1006.0:
                    clock.now = 1007.0
                    again = await made.check_staleness()
        published = _published(outbox)
        assert [(r.ready, r.reason, r.observed_at, r.control_plane_version, r.node_version) for r in published] == [
            (True, "reported ready", 1000.0, "1.30.5", "1.30.5"),
            (True, "unchanged", 1006.0, "1.30.5", "1.30.5"),  # the repeat
            (True, "reported ready", 1008.0, "1.31.2", "1.30.5"),  # the version alone changed
        ]
        assert [(r.reason, r.control_plane_version) for r in again] == [("unchanged", "1.30.5")]

    engine = new_state(
        Sequence.model_validate({"name": "s", "channel": "regular", "stages": [{"name": "a", "clusterNames": ["c1"]}]}),
        [Cluster(name="c1", version="1.30.5")],
    )
    _, out = decide(engine, StartRollout(event_id="e1", version="1.31.2", tracks=(Track.CONTROL_PLANE,)), 990.0)
    [advance] = [c for c in out if isinstance(c, StageAdvance)]
    result = UpgradeResult(
        command_id=advance.command_id,
        cluster="c1",
        track=Track.CONTROL_PLANE,
        version="1.31.2",
        outcome="succeeded",
        finished_at=1005.0,
    )
    decide(engine, result, 1005.0)
    _, out = decide(engine, published[1], 1006.5)  # the repeat, observed after the upgrade finished
    assert [(n.code, n.cluster) for n in out if isinstance(n, Notice)] == [("VERSION_MISMATCH", "c1")]
    assert track_status(engine, engine.clusters["c1"], 0) == (
        ClusterStatus.NOT_READY,
        "VERSION_MISMATCH: upgraded to 1.31.2 but reports 1.30.5",
    )
    _, out = decide(engine, published[2], 1008.5)
    assert [(n.code, n.cluster) for n in out if isinstance(n, Notice)] == [("VERSION_CONFIRMED", "c1")]
    assert track_status(engine, engine.clusters["c1"], 0) == (ClusterStatus.COMPLETE, None)


def _published(outbox: RecordingOutbox) -> list[Readiness]:
    found = []
    for topic, _, value, headers in outbox.sent:
        if topic == READINESS.name:
            _, message = decode(value, headers, READINESS.models)
            assert isinstance(message, Readiness)
            found.append(message)
    return found


async def _settle() -> None:
    """Let the acknowledgements' done-callbacks run (they are scheduled, not called inline)."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_bus_4_a_row_is_written_only_after_its_readiness_and_every_earlier_one_is_acknowledged(
    monitor: HealthMonitor, outbox: RecordingOutbox
) -> None:
    """The agent sends without waiting for each ack, but a heartbeat is finished (row written,
    event acked for faust's commit) only in arrival order once its readiness is on the topic: a
    crash before that replays the heartbeat and the row does not claim a change was published."""
    outbox.hold = True
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        for cluster in ("c1", "c2", "c1"):
            value, headers = _heartbeat(cluster, True)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=1000.0)
        # both changes went out without waiting; the repeat was judged against c1's unwritten row
        assert outbox.readiness() == [("c1", True, "reported ready"), ("c2", True, "reported ready")]
        assert len(outbox.held) == 2 and "c1" not in monitor.table and "c2" not in monitor.table
        outbox.held[1].set_result(None)
        await _settle()
        assert "c2" not in monitor.table  # acknowledged, but behind c1's, which is not
        outbox.held[0].set_result(None)
        await _settle()
        assert monitor.table["c1"]["last_published"] is True and monitor.table["c2"]["last_published"] is True
        assert monitor.healthy


async def test_bus_4_a_failed_readiness_send_finishes_nothing_after_it(
    monitor: HealthMonitor, outbox: RecordingOutbox
) -> None:
    """A send the broker refused stops the queue: no later heartbeat's offset may be committed."""
    outbox.hold = True
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        for cluster in ("c1", "c2"):
            value, headers = _heartbeat(cluster, True)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=1000.0)
        outbox.held[0].set_exception(ConnectionError("broker gone"))
        outbox.held[1].set_result(None)
        await _settle()
        assert "c1" not in monitor.table and "c2" not in monitor.table
        assert not monitor.healthy


async def test_the_data_directory_is_the_configured_one_not_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outbox: RecordingOutbox
) -> None:
    """faust makes its data directory when the app first starts: in `data_dir` when one is set, so
    a monitor started from a checkout (a test, a benchmark) leaves no `<app id>-data` tree there."""
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    made = HealthMonitor(MonitorSettings(topic_prefix="t.", data_dir=data), outbox=outbox)
    await made.app.on_first_start()  # what a starting worker runs first: it makes the directories
    assert list(cwd.iterdir()) == []
    assert sorted(path.relative_to(data).as_posix() for path in data.rglob("*")) == ["v1", "v1/tables"]


async def test_a_heartbeat_that_changes_nothing_writes_no_row_until_the_checkpoint_interval(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """Issue 21: the row (and its changelog record) is written on a change and once per checkpoint
    interval (120 s by default), when the heartbeats pass the cluster's mark in it: c1's falls
    35.5 s into each interval counted from 1000 (its phase, 44.46 s, from its name). So the heartbeat
    of 1060, the first past 1035.5, writes; the next mark is 1155.5. Between, the time is kept in
    memory, and staleness counts from it (BUS-7): c1, last heard at 1119, is not stale at 1140
    (limit 30)."""
    settings = MonitorSettings(staleness_limit_s=30, republish_interval_s=0, checkpoint_interval_s=120)
    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        rows: list[float] = []
        async with made.agent.test_context(channel=raw) as agent:
            for at in (1000.0, 1030.0, 1060.0, 1119.0):
                clock.now = at
                value, headers = _heartbeat("c1", True, at)
                await agent.put(value, key=b"c1", headers=headers, timestamp=at)
                rows.append(made.table["c1"]["last_seen"])
            clock.now = 1140.0
            assert await made.check_staleness() == []
            value, headers = _heartbeat("c1", True, 1120.0)
            await agent.put(value, key=b"c1", headers=headers, timestamp=1120.0)
            rows.append(made.table["c1"]["last_seen"])
            clock.now = 1151.0
            [stale] = await made.check_staleness()
        assert rows == [1000.0, 1000.0, 1060.0, 1060.0, 1060.0]
        assert (stale.cluster, stale.reason) == ("c1", "stale: no heartbeat for 31 s")
        assert outbox.readiness() == [("c1", True, "reported ready"), ("c1", False, "stale: no heartbeat for 31 s")]


async def test_a_row_silent_for_the_expiry_is_dropped_and_its_stale_mark_no_longer_repeated(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """Issue 24: one heartbeat each for made-up names must not be repeated for ever. c1 is heard once
    at 1000 (limit 30 s, repeats every 5 s, expiry 100 s): stale at 1031, its stale mark repeated
    until 1100, then its row goes (counted) and nothing more is said of it; a later heartbeat is a
    first one again."""
    settings = MonitorSettings(staleness_limit_s=30, check_interval_s=5, republish_interval_s=5, row_expiry_s=100)
    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        said: list[tuple[float, bool, str | None]] = []
        async with made.agent.test_context(channel=raw) as agent:
            value, headers = _heartbeat("c1", True, 1000.0)
            await agent.put(value, key=b"c1", headers=headers, timestamp=1000.0)
            for now in (1031.0, 1050.0, 1099.0, 1100.0, 1105.0, 1200.0):
                clock.now = now
                said += [(now, r.ready, r.reason) for r in await made.check_staleness()]
            gone = "c1" not in made.table
            clock.now = 1201.0
            value, headers = _heartbeat("c1", True, 1201.0)
            await agent.put(value, key=b"c1", headers=headers, timestamp=1201.0)
        assert said == [
            (1031.0, False, "stale: no heartbeat for 31 s"),
            (1050.0, False, "unchanged"),
            (1099.0, False, "unchanged"),
        ]
        assert gone
        assert outbox.readiness()[-1] == ("c1", True, "reported ready")
        assert _sample(made, "rollout_health_rows_expired_total") == 1


async def test_after_a_revocation_a_cluster_is_judged_from_its_row_plus_the_checkpoint_interval(
    outbox: RecordingOutbox, clock: FakeClock
) -> None:
    """Issue 21, BUS-7: partitions revoked (a rebalance) make the worker forget the times it kept in
    memory, since another worker may have heard newer heartbeats meanwhile. c1's row says 1000, its
    heartbeat at 1030 was not checkpointed (interval 120 s; c1's mark in it falls at 1035.5): after
    the revocation it is not stale at 1149 (1000 + 120 + limit 30 = 1150), and stale at 1150,
    counted from the row."""
    settings = MonitorSettings(staleness_limit_s=30, republish_interval_s=0, checkpoint_interval_s=120)
    with running_monitor(settings, outbox, clock) as made:
        raw = raw_channel(made)
        async with made.agent.test_context(channel=raw) as agent:
            for at in (1000.0, 1030.0):
                clock.now = at
                value, headers = _heartbeat("c1", True, at)
                await agent.put(value, key=b"c1", headers=headers, timestamp=at)
            assert made.table["c1"]["last_seen"] == 1000.0
            await made.app.on_partitions_revoked.send(set())
            clock.now = 1149.0
            assert await made.check_staleness() == []
            clock.now = 1150.0
            [stale] = await made.check_staleness()
        assert (stale.cluster, stale.reason) == ("c1", "stale: no heartbeat for 150 s")


async def test_bus7_a_worker_behind_does_not_call_stale_a_cluster_whose_heartbeat_waits_in_its_backlog(
    monitor: HealthMonitor, outbox: RecordingOutbox, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: the worker owns heartbeat partition 0 and has judged offsets 0 and 1 (c1 at 1000,
    c2 at 1010) of five: c1's next heartbeat may be among offsets 2 to 4. At 1035 (limit 30 s) it
    judges silence as of 1010, the newest record it has read: c1 has been silent 10 s, not 35. Read
    to the end, it judges as of now (the next test). Never more than the limit behind: with the
    backlog unread at 1100, silence is judged as of 1070."""
    monkeypatch.setattr(monitor.app.consumer, "highwater", lambda tp: 5)
    topic = monitor.heartbeats.get_topic_name()
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        await monitor.app.on_partitions_assigned.send({TP(topic, 0), TP("other", 0)})
        for cluster, at in (("c1", 1000.0), ("c2", 1010.0)):
            value, headers = _heartbeat(cluster, True, at)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=at)
        clock.now = 1035.0
        assert await monitor.check_staleness() == []
        assert _sample(monitor, "rollout_health_judged_behind_seconds") == 25.0
        clock.now = 1100.0
        stale = await monitor.check_staleness()
        assert [(r.cluster, r.reason, r.observed_at) for r in stale] == [
            ("c1", "stale: no heartbeat for 70 s", 1070.0),
            ("c2", "stale: no heartbeat for 60 s", 1070.0),
        ]
        assert _sample(monitor, "rollout_health_judged_behind_seconds") == 30.0


async def test_bus7_a_worker_read_to_the_end_judges_silence_now(
    monitor: HealthMonitor, outbox: RecordingOutbox, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(monitor.app.consumer, "highwater", lambda tp: 2)
    topic = monitor.heartbeats.get_topic_name()
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        await monitor.app.on_partitions_assigned.send({TP(topic, 0)})
        for cluster, at in (("c1", 1000.0), ("c2", 1010.0)):
            value, headers = _heartbeat(cluster, True, at)
            await agent.put(value, key=cluster.encode(), headers=headers, timestamp=at)
        clock.now = 1035.0
        stale = await monitor.check_staleness()
    assert [(r.cluster, r.reason, r.observed_at) for r in stale] == [("c1", "stale: no heartbeat for 35 s", 1035.0)]
    assert _sample(monitor, "rollout_health_judged_behind_seconds") == 0.0


async def test_a_partition_the_consumer_no_longer_has_holds_silence_back_and_breaks_nothing(
    monitor: HealthMonitor, outbox: RecordingOutbox, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiokafka's consumer thread learns of a rebalance before faust's signals reach the monitor, and
    asserts a partition it no longer has is assigned: the check goes on, that partition's end
    unknown (as if not fetched yet: silence judged at most the limit behind)."""

    def not_assigned(tp: TP) -> int:
        raise AssertionError("Partition is not assigned")

    monkeypatch.setattr(monitor.app.consumer, "highwater", not_assigned)
    raw = raw_channel(monitor)
    async with monitor.agent.test_context(channel=raw) as agent:
        await monitor.app.on_partitions_assigned.send({TP(monitor.heartbeats.get_topic_name(), 0)})
        value, headers = _heartbeat("c1", True, 1000.0)
        await agent.put(value, key=b"c1", headers=headers, timestamp=1000.0)
        clock.now = 1035.0
        assert await monitor.check_staleness() == []  # judged as of 1005: silent 5 s
        clock.now = 1065.0
        [stale] = await monitor.check_staleness()
    assert (stale.cluster, stale.reason) == ("c1", "stale: no heartbeat for 35 s")
