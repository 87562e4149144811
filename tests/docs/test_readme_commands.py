"""Every offline `rollout` command the README shows runs and succeeds, and the output it quotes is real."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from rollout_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```sh\n(.*?)```", README, flags=re.S)
# The offline commands; those that talk to Kafka and Redis (apply, release, status) are run with
# the services by tests/docs/test_doc_commands.py.
OFFLINE = {"demo", "validate", "plan", "simulate"}
COMMANDS = [
    line.split("#")[0].strip()
    for block in BLOCKS
    for line in block.splitlines()
    if line.startswith("rollout ") and line.split()[1] in OFFLINE
]


def test_the_readme_shows_the_offline_commands() -> None:
    verbs = {shlex.split(c)[1] for c in COMMANDS}
    assert verbs == OFFLINE


# The paced demo takes about 40 s of mostly waiting: tests/docs/test_doc_commands.py runs it in
# the background beside other work and checks its summary.
IN_THE_BACKGROUND = {"rollout demo --no-live"}


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in IN_THE_BACKGROUND])
def test_readme_command_succeeds(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(shlex.split(command)[1:]) == 0
    capsys.readouterr()


def test_quoted_simulate_output_is_what_simulate_prints(capsys: pytest.CaptureFixture[str]) -> None:
    quoted = re.search(r"```text\n(.*?)```", README, flags=re.S)
    assert quoted is not None
    lines = [line for line in quoted.group(1).splitlines() if line.strip() and line.strip() != "..."]
    os.chdir(ROOT)
    assert main(["simulate", "../shared/conformance/cases/gke-bank-soak.yaml"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[: len(lines)] == lines
