"""A command's client close is bounded the way the services bound theirs (`bounded_close`), and
a close left to the exit, or one that fails, is not printed: after Ctrl-C or with a broker gone
that is how a command ends, not something a user can act on (OPS-, BUS-)."""

from __future__ import annotations

import subprocess
import sys
import time

from rollout_cli.ctrl_c import CLOSE_S, LEFTOVER_S

_SLACK_S = 3.0  # the interpreter's start and imports on a loaded machine

# A command whose first client's close never ends and whose second fails, run as `main` runs it
# (in a process of its own: what reaches stderr there is what a user sees).
_COMMAND = """
import argparse, asyncio, sys
from rollout_cli import ctrl_c
from rollout_cli.async_command import async_command

async def never_ends():
    await asyncio.Event().wait()

async def fails():
    raise ConnectionError("the broker is gone")

async def command(args):
    await ctrl_c.closed(never_ends())
    await ctrl_c.closed(fails())
    return 0

sys.exit(async_command(command)(argparse.Namespace()))
"""


def test_a_close_that_never_ends_is_left_after_close_s_and_nothing_is_printed() -> None:
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _COMMAND], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - began
    assert (done.returncode, done.stderr) == (0, "")
    assert CLOSE_S <= took < CLOSE_S + LEFTOVER_S + _SLACK_S
