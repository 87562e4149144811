"""`rollout watch`: the status screen moved on by progress events, or one line per event."""

from __future__ import annotations

import asyncio
import io
import re
import sys

import pytest
from rich.console import Console

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.memory_bus import kafka_partition
from rollout_cli.dashboard import status_view
from rollout_cli.demo_scenario import builtin_scenario
from rollout_cli.demo_simulation import status_document
from rollout_cli.main import main
from rollout_cli.progress_model import ProgressModel
from rollout_common import envelope
from rollout_common.commands import Command, Notice, WakeAt
from rollout_common.topics import ALL
from rollout_common.topics.catalog import PROGRESS
from rollout_planner.simulation.runner import Simulator

NO_REDIS = "redis://127.0.0.1:1/0"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _demo_until(at: float) -> Simulator:
    sim = Simulator(builtin_scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= at:
        sim.step()
    return sim


def _progress(commands: list[Command]) -> list[dict[str, object]]:
    return [c.model_dump(mode="json", by_alias=True) for c in commands if not isinstance(c, WakeAt)]


def _render(model: ProgressModel) -> str:
    console = Console(file=io.StringIO(), width=160)
    console.print(status_view(model.doc, clock=model.doc["now"], title="watch"))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return " ".join(out.split())


def test_events_alone_rebuild_stages_waits_and_rollouts() -> None:
    sim = _demo_until(2 * 3600)
    model = ProgressModel(None, now=sim.origin)
    for body in _progress(sim.report.commands):
        model.apply(body, at=sim.state.now)
    screen = _render(model)
    assert "rollout demo-1 RUNNING" in screen
    assert "1 earlier partition(s) NotReady (canary) > maxUnavailablePartitions 0" in screen
    tracks = {s["name"]: s["tracks"]["controlPlane"]["state"] for s in model.doc["stages"]}
    assert tracks == {"test": "COMPLETE", "staging": "IN_PROGRESS"}


def test_events_move_a_stored_document_forward() -> None:
    before = _demo_until(8 * 3600 + 30 * 60)
    seen = len(before.report.commands)
    model = ProgressModel(status_document(before), now=before.state.now)
    after = _demo_until(9 * 3600 + 10 * 60)
    for body in _progress(after.report.commands[seen:]):
        model.apply(body, at=after.state.now)
    prod = next(s for s in model.doc["stages"] if s["name"] == "prod")["tracks"]
    assert prod["controlPlane"]["state"] == "IN_PROGRESS"
    assert prod["nodes"]["state"] == "IN_PROGRESS"
    assert prod["controlPlane"]["counts"]["IN_PROGRESS"] > 0  # batches counted as upgrading
    assert {w["rule"] for w in prod["nodes"]["waits"]} == {"GATE-1", "GATE-3"}
    assert "partition Partition 0 - 42: 26 clusters unavailable, maxUnavailable is 4" in _render(model)


async def _publish_demo_progress(bootstrap: str, prefix: str, *, until: float) -> int:
    sim = _demo_until(until)
    bus = KafkaBus(bootstrap, client_id=f"{prefix}test")
    commands = [c for c in sim.report.commands if not isinstance(c, WakeAt)]
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])
        for number, command in enumerate(commands):
            value, headers = envelope.encode(command, event_id=f"{prefix}{number}", source="test", at=sim.state.now)
            await bus.publish(prefix + PROGRESS.name, key=PROGRESS.key(command).encode(), value=value, headers=headers)
    finally:
        await bus.close()
    return len(commands)


@pytest.mark.integration
def test_watch_plain_prints_one_line_per_event(
    kafka_bootstrap: str, topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = topic_prefix + "."
    published = asyncio.run(_publish_demo_progress(kafka_bootstrap, prefix, until=2 * 3600))
    argv = ["watch", "--plain", "--from-beginning", "--count", str(published)]
    assert main([*argv, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == published
    assert any("wait_changed" in line and "staging/controlPlane" in line and "GATE-3" in line for line in lines)


@pytest.mark.integration
def test_watch_draws_the_status_screen_from_events(
    kafka_bootstrap: str, topic_prefix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = topic_prefix + "."
    published = asyncio.run(_publish_demo_progress(kafka_bootstrap, prefix, until=2 * 3600))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["watch", "--from-beginning", "--count", str(published), "--redis", NO_REDIS]
    assert main([*argv, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]) == 0
    screen = " ".join(_ANSI.sub("", capsys.readouterr().out).split())
    assert f"rollout watch · {prefix}rollout.progress" in screen
    assert "1 earlier partition(s) NotReady (canary) > maxUnavailablePartitions 0" in screen
    assert "Latest events" in screen


async def _publish_bad_progress(bootstrap: str, prefix: str) -> list[str]:
    """Bad records then one good notice on the progress topic, one partition (one key) so in order;
    returns the line `rollout watch --plain` must print for each."""
    good = Notice(code="SEQ-6", message="cluster c-1 joined canary", cluster="c-1", stage="canary")
    value, headers = envelope.encode(good, event_id="n-1", source="test", at=1_767_225_600.0)
    inner = value.decode()[1:-1]
    bad = [
        (b"\x00{not json", headers, "value is not JSON: "),
        (
            ("{" + '"n": ' + "9" * 5000 + ", " + inner + "}").encode(),
            headers,
            "value exceeds a bound: a number of 5000",
        ),
        (b"[" * 10_000 + b"]" * 10_000, headers, "value exceeds a bound: nesting 10000 deep (limit 32)"),
        (("{" + '"n": NaN, ' + inner + "}").encode(), headers, "value holds NaN, which JSON does not allow"),
        (value, {}, "missing CloudEvents header(s): ce_specversion, ce_id, ce_source, ce_type; send"),
        (value, dict(headers, ce_type=b"io.rollout.bogus.v1"), "ce_type 'io.rollout.bogus.v1' is not one of"),
    ]
    bus = KafkaBus(bootstrap, client_id=f"{prefix}test")
    try:
        await bus.ensure_topics([t.spec(prefix) for t in ALL])
        for raw, hdrs, _ in bad:
            await bus.publish(prefix + PROGRESS.name, key=b"one", value=raw, headers=hdrs)
        # a header name that is not UTF-8 (kcat writes names as bytes): the Kafka client raised on
        # it on every poll, and the watch stopped
        await _kcat(bootstrap, prefix + PROGRESS.name, key=b"one", value=value, headers=headers, name=b"\xff\xfe")
        await bus.publish(prefix + PROGRESS.name, key=b"one", value=value, headers=headers)
    finally:
        await bus.close()
    reasons = [reason for _, _, reason in bad] + ["a header is not UTF-8: the name b'\\xff\\xfe'"]
    return [f"(unreadable progress event: {reason}" for reason in reasons]


async def _kcat(
    bootstrap: str, topic: str, *, key: bytes, value: bytes, headers: dict[str, bytes], name: bytes
) -> None:
    """One record with a further header named `name` (raw bytes), on `key`'s partition."""
    partition = kafka_partition(key, PROGRESS.partitions)
    argv = [
        b"kcat",
        b"-P",
        b"-b",
        bootstrap.encode(),
        b"-t",
        topic.encode(),
        b"-p",
        str(partition).encode(),
        b"-k",
        key,
    ]
    for header, data in [*((h.encode(), d) for h, d in headers.items()), (name, b"v")]:
        argv += [b"-H", header + b"=" + data]
    kcat = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE)
    await asyncio.wait_for(kcat.communicate(value + b"\n"), 60)
    assert kcat.returncode == 0


@pytest.mark.integration
def test_watch_goes_on_past_records_it_cannot_read(
    kafka_bootstrap: str, topic_prefix: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """BUS-4 for a follower: each bad record is one line saying why, then the good event is shown,
    in the plain listing and on the status screen."""
    prefix = topic_prefix + "."
    expected = asyncio.run(_publish_bad_progress(kafka_bootstrap, prefix))
    argv = ["watch", "--plain", "--from-beginning", "--count", str(len(expected) + 1)]
    assert main([*argv, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(expected) + 1
    for line, start in zip(lines, expected, strict=False):
        assert line.startswith(start), (line, start)
    assert "notice" in lines[-1] and "code=SEQ-6" in lines[-1]
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["watch", "--from-beginning", "--count", str(len(expected) + 1), "--redis", NO_REDIS]
    assert main([*argv, "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix]) == 0
    screen = " ".join(_ANSI.sub("", capsys.readouterr().out).split())
    assert "unreadable progress event: value exceeds a bound: nesting 10000 deep" in screen
