"""How every subcommand presents itself: a summary, what it does, worked examples, the exit codes."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence

from rollout_cli.exit_codes import table

_WIDTH = 92


def command(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    *,
    summary: str,
    description: str,
    examples: Sequence[str],
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """A subcommand whose `--help` teaches: what it does, examples to copy, and what its exit code means."""
    shown = "\n".join(f"  {example}" for example in examples)
    return sub.add_parser(  # type: ignore[no-any-return]
        name,
        parents=list(parents),
        help=summary,
        # Raw, so the examples keep their lines; the prose is wrapped here instead.
        description="\n\n".join(textwrap.fill(p, width=_WIDTH) for p in description.split("\n\n")),
        epilog=f"examples:\n{shown}\n\n{table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def group(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    *,
    dest: str,
    metavar: str,
    summary: str,
    description: str,
    examples: Sequence[str],
) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    """A command that is a family of others (`rollout schemas export`): it presents itself as `command`
    does, and the returned subparsers take its members, one of which must be named (stored in `dest`)."""
    parser = command(sub, name, summary=summary, description=description, examples=examples)
    return parser.add_subparsers(dest=dest, required=True, metavar=metavar)


__all__ = ["command", "group"]
