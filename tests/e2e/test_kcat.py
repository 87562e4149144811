"""The kcat example of docs/events.md, run with the real `kcat` against a running planner (BUS-2, BUS-4).

The command and its JSON body are parsed out of the document, so the document is what is
tested: only the broker address and the topic (given this test's prefix) are replaced. Then the
same command with a body that fails validation must land on the dead-letter topic with a
`dlq_reason`, while the planner keeps running and still takes the documented message after it.

`kcat` comes from Debian (`deploy/local/system-deps.sh`, which `make test` runs first); without
it these tests fail, they do not skip.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiokafka.admin import AIOKafkaAdminClient
from service_processes import ServiceProcesses
from topic_reader import Message, read_topic

from rollout_common.topics.catalog import DEAD_LETTER, PROGRESS, RELEASE_TARGETS, STAGE_ADVANCE

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

EVENTS_DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"
SECTION = "## Publishing a release target with kcat"
DOC_BROKER = "localhost:9092"
OLD = "1.30.5-gke.1000"
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DocumentedPublish:
    """`echo BODY | kcat ARGS` as the document writes it."""

    body: str
    kcat_args: list[str]

    def argv(self, *, broker: str, prefix: str) -> list[str]:
        """The kcat command line with this test's broker, and its prefix before the topic name."""
        args = list(self.kcat_args)
        for flag, documented, ours in (
            ("-b", DOC_BROKER, broker),
            ("-t", RELEASE_TARGETS.name, prefix + RELEASE_TARGETS.name),
        ):
            at = args.index(flag)
            assert args[at + 1] == documented, f"docs/events.md: expected `{flag} {documented}`, found {args[at + 1]!r}"
            args[at + 1] = ours
        return [kcat_binary(), *args[1:]]


def documented_commands() -> list[str]:
    """The shell blocks of the kcat section, and the inline kcat commands of its text."""
    text = EVENTS_DOC.read_text()
    assert SECTION in text, f"{EVENTS_DOC} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    inline = re.findall(r"`(kcat [^`]+)`", section)
    return [block.replace("\\\n", " ") for block in blocks] + inline


def documented_publish() -> DocumentedPublish:
    (block,) = [command for command in documented_commands() if "kcat -P" in command]
    tokens = shlex.split(block)
    pipe = tokens.index("|")
    assert tokens[0] == "echo" and pipe == 2, f"expected `echo '<json>' | kcat ...`, got {block!r}"
    assert tokens[pipe + 1] == "kcat", block
    return DocumentedPublish(body=tokens[1], kcat_args=tokens[pipe + 1 :])


def documented_follow() -> list[str]:
    """`kcat -C ... -t rollout.progress ...`: the document's way to follow progress."""
    (command,) = [command for command in documented_commands() if "kcat -C" in command]
    return shlex.split(command)


def kcat_binary() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail(
            "kcat is not installed; run `bash deploy/local/system-deps.sh` (as root) or `apt-get install kcat`",
            pytrace=False,
        )
    return path


def run_kcat(argv: list[str], *, stdin: str | None = None) -> str:
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}:\n{done.stderr}"
    return done.stdout


def publish_with_kcat(broker: str, prefix: str, body: str) -> None:
    """The documented command (its headers, key and flags) with `body` piped in, as `echo` would."""
    run_kcat(documented_publish().argv(broker=broker, prefix=prefix), stdin=body + "\n")


def fleet_document() -> dict[str, Any]:
    return {
        "name": "kcat",
        "generate": [{"count": 3, "name": "dev-{i:02d}", "labels": {"env": "dev"}, "version": OLD}],
        "sequence": {
            "name": "kcat",
            "channel": "regular",
            "stages": [
                {
                    "name": "dev",
                    "clusterSelector": {"matchLabels": {"env": "dev"}},
                    "soak": "1h",
                    "rolloutStrategy": {"maxNew": 3, "maxUnavailable": "100%"},
                }
            ],
        },
    }


@pytest.fixture
def prefix(topic_prefix: str) -> str:
    return topic_prefix + "."


@pytest.fixture
def planner(tmp_path: Path, kafka_bootstrap: str, redis_url: str, prefix: str) -> Iterator[ServiceProcesses]:
    """The planner alone, its fleet and sequence from a scenario file; the test waits for its topics."""
    kcat_binary()  # fail before starting anything
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(yaml.safe_dump(fleet_document()))
    processes = ServiceProcesses(
        log_dir=tmp_path,
        base_env={
            "ROLLOUT_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "ROLLOUT_REDIS_URL": redis_url,
            "ROLLOUT_TOPIC_PREFIX": prefix,
            "ROLLOUT_LOG_LEVEL": "INFO",
        },
    )
    processes.start(
        "planner",
        ["rollout_planner.service"],
        {
            "ROLLOUT_REDIS_NAMESPACE": prefix,
            "ROLLOUT_SCENARIO_FILE": str(fleet),
            "ROLLOUT_HTTP_PORT": "0",
            "ROLLOUT_POLL_TIMEOUT_S": "0.2",
        },
    )
    try:
        yield processes
    finally:
        processes.stop_all()


async def wait_for_topics(kafka_bootstrap: str, prefix: str, planner: ServiceProcesses) -> None:
    """The planner has created the catalog's topics, so kcat publishes to them, not to an
    auto-created one."""
    wanted = {prefix + topic.name for topic in (RELEASE_TARGETS, PROGRESS, DEAD_LETTER)}
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while not wanted <= set(await admin.list_topics()):
                assert not planner.exited(), f"planner exited:\n{planner.log_tail('planner')}"
                await asyncio.sleep(0.2)
    finally:
        await admin.close()


async def read_until(
    kafka_bootstrap: str, topic: str, partitions: int, done: Callable[[list[Message]], bool], planner: ServiceProcesses
) -> list[Message]:
    def planner_alive(_: list[Message]) -> None:
        assert not planner.exited(), f"planner exited:\n{planner.log_tail('planner')}"

    try:
        return await read_topic(
            kafka_bootstrap, topic, until=done, timeout_s=TIMEOUT_S, partitions=partitions, on_poll=planner_alive
        )
    except TimeoutError:
        pytest.fail(f"nothing satisfying on {topic} in {TIMEOUT_S}s; planner log:\n{planner.log_tail('planner')}")


def started_by(event_id: str) -> Callable[[list[Message]], bool]:
    """A rollout started by the release `event_id` (RolloutTransition RUNNING) and its first batch."""

    def done(records: list[Message]) -> bool:
        bodies = [json.loads(r.value) for r in records]
        running = [
            b
            for b in bodies
            if b["kind"] == "rollout_transition" and b["state"] == "RUNNING" and event_id in b["reason"]
        ]
        return bool(running) and any(
            b["kind"] == "stage_advance" and b["rolloutId"] == running[0]["rolloutId"] for b in bodies
        )

    return done


async def test_the_documented_kcat_release_target_starts_a_rollout(
    kafka_bootstrap: str, prefix: str, planner: ServiceProcesses
) -> None:
    documented = documented_publish()
    release = json.loads(documented.body)
    await wait_for_topics(kafka_bootstrap, prefix, planner)

    run_kcat(documented.argv(broker=kafka_bootstrap, prefix=prefix), stdin=documented.body + "\n")

    records = await read_until(
        kafka_bootstrap, prefix + PROGRESS.name, PROGRESS.partitions, started_by(release["eventId"]), planner
    )
    advances = [json.loads(r.value) for r in records if dict(r.headers)["ce_type"] == b"io.rollout.stage_advance.v1"]
    assert {a["version"] for a in advances} == set(release["targets"].values())
    assert sorted(c for a in advances for c in a["clusters"]) == ["dev-01", "dev-02", "dev-03"]
    # The stage-advance topic carries the same batch for executors.
    await read_until(kafka_bootstrap, prefix + STAGE_ADVANCE.name, STAGE_ADVANCE.partitions, bool, planner)

    # The document's way to follow progress shows it too (-e: stop at the end instead of following).
    follow = documented_follow()
    follow[follow.index("-b") + 1] = kafka_bootstrap
    follow[follow.index("-t") + 1] = prefix + follow[follow.index("-t") + 1]
    shown = run_kcat([kcat_binary(), *follow[1:], "-e"])
    assert "ce_type=io.rollout.rollout_transition.v1" in shown, shown
    assert f"started by event {release['eventId']}" in shown, shown


async def test_a_malformed_release_target_from_kcat_is_dead_lettered_and_the_planner_goes_on(
    kafka_bootstrap: str, prefix: str, planner: ServiceProcesses
) -> None:
    documented = documented_publish()
    release = json.loads(documented.body)
    malformed = {**release, "eventId": "rel-bad", "targets": {"1.30": "1.31"}}  # '1.31' is not a version
    await wait_for_topics(kafka_bootstrap, prefix, planner)

    publish_with_kcat(kafka_bootstrap, prefix, json.dumps(malformed))
    (letter,) = await read_until(kafka_bootstrap, prefix + DEAD_LETTER.name, DEAD_LETTER.partitions, bool, planner)

    headers = {name: value.decode() for name, value in letter.headers}
    assert json.loads(letter.value) == malformed
    assert letter.key == b"regular"
    # The reason names the model, the field and what is wrong with it.
    reason = headers["dlq_reason"]
    assert reason.startswith("invalid ReleaseTarget: targets") and "'1.31' is not a version" in reason, reason
    assert headers["dlq_topic"] == prefix + RELEASE_TARGETS.name
    assert (headers["dlq_partition"], headers["dlq_offset"]) == ("0", "0")
    assert headers["ce_id"] == "rel-1"  # the original headers, unchanged
    assert not planner.exited()

    # The partition is not blocked: the documented message behind it still starts a rollout.
    publish_with_kcat(kafka_bootstrap, prefix, documented.body)
    await read_until(
        kafka_bootstrap, prefix + PROGRESS.name, PROGRESS.partitions, started_by(release["eventId"]), planner
    )
    assert not planner.exited()
