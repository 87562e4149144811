"""`rollout schemas export|asyncapi`: the event schemas and the AsyncAPI document, written to files (BUS-2)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rollout_cli import help_text
from rollout_cli.async_command import async_command
from rollout_cli.exit_codes import ExitCode
from rollout_cli.schema_export import write_asyncapi, write_schemas
from rollout_common.topics import ALL
from rollout_common.topics.asyncapi import ASYNCAPI_VERSION


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    schemas_sub = help_text.group(
        sub,
        "schemas",
        dest="schemas_command",
        metavar="ACTION",
        summary="JSON Schemas and the AsyncAPI document of every event (BUS-2)",
        description="Writes what any Kafka client needs to produce and read our events.",
        examples=["rollout schemas export schemas/", "rollout schemas asyncapi asyncapi.json"],
    )
    export = help_text.command(
        schemas_sub,
        "export",
        summary="write one JSON Schema per event type, plus index.json",
        description="One draft 2020-12 JSON Schema per event type, with the same patterns and bounds the "
        "services check, and index.json listing each topic's schemas.",
        examples=["rollout schemas export schemas/"],
    )
    export.add_argument("dir", type=Path, help="folder to write, e.g. schemas/ (created if missing)")
    export.set_defaults(handler=async_command(_export_schemas))
    asyncapi = help_text.command(
        schemas_sub,
        "asyncapi",
        summary="write the AsyncAPI 3 document of every topic and message",
        description="Channels, messages (with their CloudEvents headers) and operations of every topic, from "
        "the topic catalog the services use.",
        examples=["rollout schemas asyncapi asyncapi.json"],
    )
    asyncapi.add_argument("file", type=Path, help="file to write, e.g. asyncapi.json")
    asyncapi.set_defaults(handler=async_command(_write_asyncapi))


async def _export_schemas(args: argparse.Namespace) -> int:
    count = write_schemas(args.dir)
    print(f"wrote {count} schema(s) and index.json to {args.dir}")
    return ExitCode.OK


async def _write_asyncapi(args: argparse.Namespace) -> int:
    write_asyncapi(args.file)
    print(f"wrote the AsyncAPI {ASYNCAPI_VERSION} document of {len(ALL)} topics to {args.file}")
    return ExitCode.OK


__all__ = ["register"]
