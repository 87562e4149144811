"""The `rollout` command: one entry point, one sub-command module each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rollout_cli import configdoc, demo, offline, operator


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rollout", description="Staged, gated Kubernetes fleet upgrades.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    offline.register(sub)
    demo.register(sub)
    operator.register(sub)
    configdoc.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
