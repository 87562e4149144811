"""How a command that talks to Kafka or Redis runs: on its own event loop, Ctrl-C and errors
turned into one line and the exit code of `rollout_cli.exit_codes`, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from rollout_adapters import shutdown
from rollout_cli import ctrl_c
from rollout_cli.exit_codes import CliError, ExitCode


def async_command(run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> Callable[[argparse.Namespace], int]:
    """Run an async command; turn the errors a person can act on into one line and their exit code.

    Ctrl-C exits with the command's `on_ctrl_c`: 130 by convention, 0 for `watch`, where it is how
    one stops (`rollout_cli.main`).
    """

    def handle(args: argparse.Namespace) -> int:
        # aiokafka logs each failed connection attempt; the one line below says it better.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        # A close left to the exit after Ctrl-C or with a broker gone is how a command ends, not a
        # warning a user can act on: the services log it, the CLI does not.
        logging.getLogger(shutdown.__name__).setLevel(logging.ERROR)
        try:
            with ctrl_c.held():
                return ctrl_c.run(run(args))
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return int(exc.code)
        except (KeyboardInterrupt, ctrl_c.StoppedByCtrlCError):
            return int(getattr(args, "on_ctrl_c", ExitCode.INTERRUPTED))

    return handle


__all__ = ["async_command"]
