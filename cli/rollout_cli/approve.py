"""`rollout approve`: open a stage's approval gate for a rollout (CHK-1), waiting for the answer (OPS-3)."""

from __future__ import annotations

import argparse
import uuid

from rollout_cli import help_text
from rollout_cli.acks import send_command
from rollout_cli.async_command import async_command
from rollout_cli.exit_codes import BadInputError
from rollout_cli.options import ACK_HELP, TARGET_HELP, ack_options, common_options, target_options
from rollout_cli.publishing import user, validated
from rollout_common.events import OperatorCommand

# What each exit code means for an approval in particular; the table of every command follows in --help.
_EXITS = (
    "Exit 0: accepted, including an approval of a gate already open (ALREADY_APPROVED). Exit 1: rejected, "
    "with the planner's reason: an unknown rollout or stage, a stage without that gate, or a gate that is "
    "not waiting (not reached yet, or its rollout cancelled). Exit 4: no answer within --timeout; the "
    "approval may still be applied, so look with `rollout status` first (repeating it is harmless)."
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = help_text.command(
        sub,
        "approve",
        parents=[common_options(), ack_options()],
        summary="approve a stage's gate for a rollout: before it starts, or after it soaked (CHK-1)",
        description="Opens the approval gate of a stage for a rollout waiting there (AWAITING_APPROVAL): "
        "`before` lets the stage start the version, `after` qualifies it downstream. A gate not reached yet "
        "cannot be approved in advance; approving an open gate again is accepted as ALREADY_APPROVED. "
        f"{TARGET_HELP}\n\n{ACK_HELP}\n\n{_EXITS}",
        examples=[
            "rollout approve --rollout main-1 --stage prod --gate before",
            "rollout approve --rollout main-1 --stage prod --gate after --by release-pipeline --comment CAB-42",
        ],
    )
    target_options(parser)
    parser.add_argument("--stage", required=True, help="the stage whose gate is approved, e.g. prod")
    parser.add_argument("--gate", required=True, choices=["before", "after"], help="which gate: before or after")
    parser.add_argument("--by", help="who approves, e.g. release-pipeline (default: $USER)")
    parser.add_argument("--comment", help="why, recorded with the approval, e.g. CAB-42")
    parser.set_defaults(handler=async_command(_approve))


async def _approve(args: argparse.Namespace) -> int:
    command: OperatorCommand = validated(
        OperatorCommand,
        command_id=f"cmd-{uuid.uuid4().hex[:12]}",
        action="approve",
        rollout_id=args.rollout,
        all_rollouts=args.all,
        stage=args.stage,
        gate=args.gate,
        issued_by=args.by or user(),
        comment=args.comment,
    )
    misplaced = command.misplaced_field()
    if misplaced is not None:  # the planner would reject it (OPS-3); said before publishing
        raise BadInputError(misplaced)
    target = f"rollout {args.rollout}" if args.rollout else "every active rollout"
    what = f"approve {command.command_id}: the {args.gate} gate of stage {args.stage} for {target}"
    return await send_command(args, command, what=what)


__all__ = ["register"]
