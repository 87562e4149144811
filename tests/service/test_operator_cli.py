"""The operator CLI: one-line errors, schema export, and apply / release / status on the real services."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
import yaml
from planner_harness import NEW, OLD, settings

from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli.main import main
from rollout_planner.service import initial_state
from rollout_planner.service.clock import ScaledClock
from rollout_planner.service.planner import Planner


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_broker_is_one_line_naming_the_address(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    code = main(["release", "--channel", "regular", "--target", f"1.30={NEW}", "--bootstrap", address])
    err = capsys.readouterr().err
    assert code == 3  # infrastructure unreachable
    assert err.count("\n") == 1 and f"cannot reach Kafka at {address}" in err


def test_a_bad_version_is_rejected_before_anything_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "--channel", "regular", "--target", "1.30=1.31", "--bootstrap", "127.0.0.1:1"]) == 1
    assert "'1.31' is not a version" in capsys.readouterr().err


def test_schemas_export_writes_one_schema_per_event_type(tmp_path: Path) -> None:
    assert main(["schemas", "export", str(tmp_path)]) == 0
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["rollout.release-targets"]["schemas"] == [
        "io.rollout.release_target.v1.json",
        "io.rollout.start_rollout.v1.json",
    ]
    schema = json.loads((tmp_path / "io.rollout.release_target.v1.json").read_text())
    assert {"eventId", "channel", "targets"} <= set(schema["properties"])


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_apply_release_and_status_through_the_cli(
    tmp_path: Path, kafka_bootstrap: str, redis_url: str, topic_prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = topic_prefix + "."
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        yaml.safe_dump(
            {
                "name": "cli",
                "generate": [{"count": 3, "name": "c-{i}", "labels": {"env": "all"}, "version": OLD}],
                "sequence": {
                    "name": "cli",
                    "stages": [{"name": "all", "clusterSelector": {"matchLabels": {"env": "all"}}}],
                },
            }
        )
    )
    common = ["--bootstrap", kafka_bootstrap, "--redis", redis_url, "--topic-prefix", prefix, "--namespace", prefix]
    assert await asyncio.to_thread(main, ["apply", str(fleet), *common]) == 0

    bus = KafkaBus(kafka_bootstrap, client_id=f"{prefix}planner")
    store = RedisStore(redis_url, namespace=prefix)
    planner = Planner(
        bus=bus,
        store=store,
        settings=settings(prefix),
        clock=ScaledClock(origin=0.0),
        initial_state=lambda: initial_state.from_store(store),
    )
    task = asyncio.create_task(planner.run())
    try:
        assert (
            await asyncio.to_thread(
                main, ["release", "--channel", "regular", "--target", f"1.30={NEW}", "--id", "rel-cli", *common]
            )
            == 0
        )
        async with asyncio.timeout(30):
            while True:
                capsys.readouterr()
                if await asyncio.to_thread(main, ["status", "--json", *common]) == 0:
                    status = json.loads(capsys.readouterr().out)
                    if status["rollouts"] and status["clusters"] == 3:
                        break
                await asyncio.sleep(0.2)
        assert status["stages"][0]["tracks"]["controlPlane"]["state"] == "IN_PROGRESS"
        assert await asyncio.to_thread(main, ["status", *common]) == 0
        table = capsys.readouterr().out
        assert "IN_PROGRESS" in table and "cli-1" in table
    finally:
        planner.stop()
        await task
        await bus.close()
        await store.close()
