"""The `rollout` command: one entry point, one sub-command module each.

This module imports nothing heavy at its top: `main` holds Ctrl-C (`rollout_cli.ctrl_c`) before
the command modules, which take a second or more to load, are imported.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence

from rollout_cli import ctrl_c
from rollout_cli.exit_codes import ExitCode, table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollout",
        description="Staged, gated Kubernetes fleet upgrades. `rollout COMMAND --help` explains a command, "
        "with examples.",
        epilog=f"examples:\n  rollout demo\n  rollout plan fleet.yaml\n  rollout pause --rollout prod-1\n\n{table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _command_registrations():
        register(sub)
    return parser


def _command_registrations() -> list[Callable[[argparse._SubParsersAction], None]]:  # type: ignore[type-arg]
    """Each command module's `register`, in the order `rollout --help` lists them."""
    # here, not at the top: see the docstring
    from rollout_cli import (
        apply,
        approve,
        configdoc,
        demo,
        fleet_import,
        offline,
        operator_commands,
        release,
        schemas,
        status,
        watch,
    )

    return [
        offline.register,
        demo.register,
        release.register,
        operator_commands.register,
        status.register,
        watch.register,
        apply.register,
        schemas.register,
        approve.register,
        configdoc.register,
        fleet_import.register,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    with ctrl_c.held():
        args = build_parser().parse_args(argv)
        # `rollout watch` is stopped by Ctrl-C as a matter of course: exit 0 (ExitCode.INTERRUPTED's meaning)
        interrupted = int(getattr(args, "on_ctrl_c", ExitCode.INTERRUPTED))
        if ctrl_c.pressed():
            return interrupted
        try:
            with ctrl_c.allowed():
                code: int = args.handler(args)
        except KeyboardInterrupt:
            return interrupted
        except BrokenPipeError:
            # the reader went away (`rollout ... | head`): stop quietly, as other command-line tools do
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaced so interpreter exit does not flush into the closed pipe
            return 0
        return code


if __name__ == "__main__":
    sys.exit(main())
