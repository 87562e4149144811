"""`rollout status`: the status document the planner keeps in Redis, on one screen (STAT-5)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from rich.console import Console

from rollout_cli import help_text
from rollout_cli.async_command import async_command
from rollout_cli.clients import with_store
from rollout_cli.dashboard import status_view
from rollout_cli.exit_codes import BadInputError, CliError
from rollout_cli.options import common_options
from rollout_common.connection_settings import masked_url
from rollout_planner.service.checkpoint import STATUS_KEY

_PIPED_WIDTH = 160


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = common_options()
    status = help_text.command(
        sub,
        "status",
        parents=[common],
        summary="one screen: rollouts, stages, partitions, why they wait, next wake-up (STAT-5)",
        description="Reads the status document the planner keeps in Redis and shows it; --json prints it as "
        "it is stored.",
        examples=["rollout status", "rollout status --stage prod", "rollout status --json"],
    )
    status.add_argument("--json", action="store_true", help="print the raw status document, e.g. for jq")
    status.add_argument("--stage", help="show this stage only, e.g. prod")
    status.set_defaults(handler=async_command(_status))


async def read_status(args: argparse.Namespace) -> dict[str, Any]:
    raw = await with_store(args, lambda store: store.get(STATUS_KEY))
    if raw is None:
        raise BadInputError(
            f"no status yet under namespace {args.namespace!r} at {masked_url(args.redis)}: start the planner and "
            "`rollout apply` a sequence, or check --redis and --namespace"
        )
    try:
        document: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise BadInputError(
            f"the status under namespace {args.namespace!r} is not JSON: check --redis and --namespace"
        ) from exc
    return document


async def status_if_any(args: argparse.Namespace) -> dict[str, Any] | None:
    """The status document when Redis answers and holds one; None otherwise (a check that may be skipped)."""
    try:
        return await read_status(args)
    except CliError:
        return None


def check_stage(stage: str, document: Mapping[str, Any]) -> None:
    names = [s["name"] for s in document.get("stages", [])]
    if names and stage not in names:
        raise BadInputError(f"unknown stage {stage!r}: sequence {document.get('sequence')!r} has {', '.join(names)}")


async def _status(args: argparse.Namespace) -> int:
    document = await read_status(args)
    if args.stage is not None:
        check_stage(args.stage, document)
        document = {**document, "stages": [s for s in document["stages"] if s["name"] == args.stage]}
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    # Piped or captured output gets wide lines instead of rich's 80-column wrapping, so it greps.
    console = Console(width=None if sys.stdout.isatty() else _PIPED_WIDTH)
    console.print(status_view(document, clock=float(document["now"]), title=_status_title(document, args)))
    return 0


def _status_title(document: Mapping[str, Any], args: argparse.Namespace) -> str:
    where = f"sequence {document.get('sequence', '?')} (channel {document.get('channel', '?')})"
    return f"rollout status · {where} · {document.get('clusters', '?')} clusters · batch {document.get('batch', '?')}"


__all__ = ["check_stage", "read_status", "register", "status_if_any"]
