"""`rollout schemas export|asyncapi`: the event schemas and the AsyncAPI document, written to files."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import Any

from rollout_cli.exit_codes import BadInputError
from rollout_common.topics import ALL
from rollout_common.topics.asyncapi import document, dumps
from rollout_common.topics.schemas import event_schema, schema_id


def write_schemas(folder: Path) -> int:
    """One schema per event type plus index.json; returns how many schemas were written."""
    index: dict[str, Any] = {}
    written: set[str] = set()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for topic in ALL:
            files = []
            for model in topic.models:
                filename = schema_id(model)
                files.append(filename)
                if filename not in written:
                    (folder / filename).write_text(json.dumps(event_schema(model), indent=2) + "\n")
                    written.add(filename)
            index[topic.name] = {
                "partitions": topic.partitions,
                "compacted": topic.compacted,
                "schemas": files,
                "doc": topic.doc,
            }
        (folder / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    except OSError as exc:
        raise BadInputError(f"{folder}: cannot write: {exc.strerror}") from exc
    return len(written)


def write_asyncapi(path: Path) -> None:
    try:
        release = installed_version("rollout")
    except PackageNotFoundError:  # running from a source tree that was never installed
        release = "0.0.0"
    try:
        path.write_text(dumps(document(version=release)))
    except OSError as exc:
        raise BadInputError(f"{path}: cannot write: {exc.strerror}") from exc


__all__ = ["write_asyncapi", "write_schemas"]
