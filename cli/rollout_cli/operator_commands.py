"""`rollout pause|resume|cancel|retry|soak`: operator commands, each answered by the planner (OPS-1..5)."""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from rollout_cli import help_text
from rollout_cli.acks import send_command
from rollout_cli.async_command import async_command
from rollout_cli.exit_codes import BadInputError
from rollout_cli.options import ACK_HELP, TARGET_HELP, ack_options, common_options, target_options
from rollout_cli.publishing import user, validated
from rollout_cli.status import check_stage, status_if_any
from rollout_common.events import OperatorCommand


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parents = [common_options(), ack_options()]
    _register_pause_resume_cancel(sub, parents)
    _register_retry(sub, parents)
    _register_soak(sub, parents)


def _register_pause_resume_cancel(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    parents: list[argparse.ArgumentParser],
) -> None:
    for action, what, rule in (
        ("pause", "stop handing out new batches; upgrades already running finish", "OPS-1"),
        ("resume", "hand out batches again after a pause", "OPS-1"),
        ("cancel", "stop a rollout for good (CANCELLED); running upgrades finish", "OPS-1"),
    ):
        parser = help_text.command(
            sub,
            action,
            parents=parents,
            summary=f"{action} a rollout: {what} ({rule})",
            description=f"{action.capitalize()}: {what}. {TARGET_HELP}\n\n{ACK_HELP}",
            examples=[f"rollout {action} --rollout prod-1", f"rollout {action} --all --no-wait"],
        )
        target_options(parser)
        parser.set_defaults(handler=async_command(_operator_action), action=action)


def _register_retry(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:  # type: ignore[type-arg]
    retry = help_text.command(
        sub,
        "retry",
        parents=parents,
        summary="retry failed upgrades of a rollout, one stage or one cluster (OPS-4)",
        description="The failed clusters become OUT_OF_SYNC again and go out in later batches under the same "
        "gates; executors run a retried upgrade once more even though its failure is recorded. Without "
        f"--stage or --cluster every failed upgrade of the rollout is retried. {TARGET_HELP}\n\n{ACK_HELP}",
        examples=[
            "rollout retry --rollout prod-1 --cluster prod-eu-07",
            "rollout retry --rollout prod-1 --stage prod",
            "rollout retry --all",
        ],
    )
    target_options(retry)
    narrow = retry.add_mutually_exclusive_group()
    narrow.add_argument("--stage", help="retry only this stage's failed upgrades, e.g. prod")
    narrow.add_argument("--cluster", help="retry only this cluster's failed upgrades, e.g. prod-eu-07")
    retry.set_defaults(handler=async_command(_operator_action), action="retry")


def _register_soak(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:  # type: ignore[type-arg]
    soak = help_text.command(
        sub,
        "soak",
        parents=parents,
        summary="set or clear a stage's soak for one version (OPS-2)",
        description="Overrides how long a stage soaks one version before qualifying it for the next stage; "
        f"a soak under way is recomputed from when it began.\n\n{ACK_HELP}",
        examples=[
            "rollout soak --stage canary --version 1.31.13-gke.1023000 --soak 12h",
            "rollout soak --stage canary --version 1.31.13-gke.1023000 --clear",
        ],
    )
    soak.add_argument("--stage", required=True, help="stage name, e.g. canary")
    soak.add_argument("--version", required=True, help="the version the override is for, e.g. 1.31.13-gke.1023000")
    soak_choice = soak.add_mutually_exclusive_group(required=True)
    soak_choice.add_argument("--soak", help="duration from 0d to 30d, e.g. 12h or 3d")
    soak_choice.add_argument("--clear", action="store_true", help="remove the override, e.g. --clear")
    soak.set_defaults(handler=async_command(_soak))


async def _operator_action(args: argparse.Namespace) -> int:
    narrowed = {"stage": getattr(args, "stage", None), "cluster": getattr(args, "cluster", None)}
    command = _command(action=args.action, rollout_id=args.rollout, all_rollouts=args.all, **narrowed)
    target = f"rollout {args.rollout}" if args.rollout else "every active rollout"
    scope = "".join(f", {name} {value}" for name, value in narrowed.items() if value)
    return await send_command(args, command, what=f"{args.action} {command.command_id} for {target}{scope}")


async def _soak(args: argparse.Namespace) -> int:
    document = await status_if_any(args)
    if document is not None:
        check_stage(args.stage, document)
    command = _command(
        action="soak_override", stage=args.stage, version=args.version, soak=None if args.clear else args.soak
    )
    what = "cleared" if args.clear else f"set to {args.soak}"
    return await send_command(
        args, command, what=f"soak override {command.command_id}: {args.stage} / {args.version} {what}"
    )


def _command(**fields: Any) -> OperatorCommand:
    command: OperatorCommand = validated(
        OperatorCommand, command_id=f"cmd-{uuid.uuid4().hex[:12]}", issued_by=user(), **fields
    )
    misplaced = command.misplaced_field()
    if misplaced is not None:  # the planner would reject it (OPS-3); said before publishing
        raise BadInputError(misplaced)
    return command


__all__ = ["register"]
