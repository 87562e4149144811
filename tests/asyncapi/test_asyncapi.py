"""BUS-2: the AsyncAPI 3 document of every topic and message, generated from the topic catalog, is
valid for the official AsyncAPI parser (@asyncapi/parser from npm, run with node; `make test`
installs it through `make asyncapi-parser`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rollout_cli.main import main
from rollout_common.topics import ALL
from rollout_common.topics.asyncapi import channel_id, message_id

HERE = Path(__file__).parent
PARSER = HERE / "node_modules" / "@asyncapi" / "parser" / "package.json"


def _document(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    path = tmp_path / "asyncapi.json"
    assert main(["schemas", "asyncapi", str(path)]) == 0
    return path, json.loads(path.read_text())


def test_every_topic_is_a_channel_with_its_messages(tmp_path: Path) -> None:
    _, doc = _document(tmp_path)
    channels = doc["channels"]
    assert isinstance(channels, dict)
    assert {c["address"] for c in channels.values()} == {t.name for t in ALL}
    for topic in ALL:
        channel = channels[channel_id(topic)]
        assert sorted(channel["messages"]) == sorted(message_id(m) for m in topic.models)
        assert channel["bindings"]["kafka"]["partitions"] == topic.partitions
    assert doc["asyncapi"] == "3.1.0"


def test_the_official_parser_finds_the_document_valid(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not PARSER.is_file():
        pytest.fail(
            "node and @asyncapi/parser are needed: `make asyncapi-parser` installs the parser "
            f"(npm ci in {HERE.relative_to(HERE.parents[1])}); `make system-deps` installs node and npm",
            pytrace=False,
        )
    path, _ = _document(tmp_path)
    done = subprocess.run([node, str(HERE / "validate.mjs"), str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    messages = {message_id(m) for t in ALL for m in t.models}
    assert summary == {"valid": True, "version": "3.1.0", "channels": len(ALL), "messages": len(messages)}


def test_the_parser_is_not_satisfied_by_anything(tmp_path: Path) -> None:
    """The check can fail: a message reference to nowhere is an error."""
    node = shutil.which("node")
    if node is None or not PARSER.is_file():
        pytest.fail("node and @asyncapi/parser are needed: run `make asyncapi-parser`", pytrace=False)
    path, doc = _document(tmp_path)
    doc["channels"]["progress"]["messages"]["bogus"] = {"$ref": "#/components/messages/nope"}  # type: ignore[index]
    path.write_text(json.dumps(doc))
    done = subprocess.run([node, str(HERE / "validate.mjs"), str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert '"code":"invalid-ref"' in done.stdout
