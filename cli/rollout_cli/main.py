"""The `rollout` command: one entry point, one sub-command module each."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from rollout_cli import approve, configdoc, demo, fleet_import, offline, operator
from rollout_cli.exit_codes import table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollout",
        description="Staged, gated Kubernetes fleet upgrades. `rollout COMMAND --help` explains a command, "
        "with examples.",
        epilog=f"examples:\n  rollout demo\n  rollout plan fleet.yaml\n  rollout pause --rollout prod-1\n\n{table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    offline.register(sub)
    demo.register(sub)
    operator.register(sub)
    approve.register(sub)
    configdoc.register(sub)
    fleet_import.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`rollout ... | head`): stop quietly, as other command-line tools do
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaced so interpreter exit does not flush into the closed pipe
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
