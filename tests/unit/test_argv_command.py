"""A program run by the executor's command driver or the command probe is held to a bounded answer:
what it prints beyond `_STDOUT_CHARS` of stdout and the last `_STDERR_BYTES` of stderr is read and
dropped, so a runaway program neither blocks on a full pipe nor fills the caller's memory."""

from __future__ import annotations

import sys

import pytest

from rollout_adapters.argv_command import _STDERR_BYTES, _STDOUT_CHARS, run_argv

pytestmark = pytest.mark.asyncio(loop_scope="session")

# 20 MB on each stream, then a last line on stderr
RUNAWAY = (
    "import sys\n"
    "for n in range(20_000):\n"
    "    sys.stdout.write(f'{n:09d}' * 100 + '\\n')\n"
    "    sys.stderr.write('e' * 999 + '\\n')\n"
    "sys.stderr.write('the last line\\n')\n"
    "sys.exit(3)\n"
)


async def test_a_runaway_program_is_read_to_its_end_keeping_stdouts_head_and_stderrs_tail() -> None:
    outcome = await run_argv([sys.executable, "-c", RUNAWAY], timeout_s=60, stdout=True)
    assert outcome.returncode == 3
    assert outcome.stdout == "".join(f"{n:09d}" * 100 + "\n" for n in range(5))[:_STDOUT_CHARS]
    assert len(outcome.stderr) == _STDERR_BYTES
    assert outcome.stderr.endswith("e\nthe last line\n")
    assert outcome.error(lines=1, max_chars=100) == "exit code 3: the last line"


async def test_stdout_not_asked_for_is_not_kept_and_a_quiet_success_has_empty_streams() -> None:
    outcome = await run_argv([sys.executable, "-c", "print('ok')"], timeout_s=60)
    assert (outcome.returncode, outcome.stdout, outcome.stderr, outcome.succeeded) == (0, "", "", True)


async def test_a_program_that_outlives_its_time_is_stopped_and_says_so() -> None:
    outcome = await run_argv([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.5)
    assert (outcome.returncode, outcome.problem) == (None, "timed out after 0.5 s")
