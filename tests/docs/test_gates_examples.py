"""The stage gates section of docs/rollout-strategy.md, run as a person would read it: each
`rollout demo ... --status-at` command it shows runs and prints the lines the page quotes under it,
and its sequence examples are valid (CHK-1, CHK-3, CHK-4, STAT-5)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from rollout_cli.main import main
from rollout_common.events import OperatorCommand
from rollout_common.gates import GatePosition

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "rollout-strategy.md"
_SECTION = "## Stage gates: approvals, start windows, disruption budgets (CHK-1, CHK-3, CHK-4)"
_BOX = "│╭╮╰╯─ "
_BLOCK = re.compile(r"```(?P<lang>\w+)\n(?P<body>.*?)```", re.DOTALL)


def _section() -> str:
    page = PAGE.read_text(encoding="utf-8")
    return page.split(_SECTION, 1)[1].split("\n## ", 1)[0]


def _shown() -> list[tuple[str, list[str]]]:
    """Each ```sh block's command with the ```text block that follows it: what it prints, in part."""
    blocks = [(m["lang"], m["body"]) for m in _BLOCK.finditer(_section())]
    found = [
        (body.strip(), blocks[i + 1][1].splitlines())
        for i, (lang, body) in enumerate(blocks)
        if lang == "sh" and i + 1 < len(blocks) and blocks[i + 1][0] == "text"
    ]
    assert len(found) == 3, found  # one per gate with an example: approvals, start window, budget
    return found


def _flat(text: str) -> str:
    """Lines without the panel's border, joined, spaces collapsed: a wrapped line reads whole."""
    return " ".join(" ".join(line.strip(_BOX).split()) for line in text.splitlines())


@pytest.mark.parametrize(("command", "lines"), _shown(), ids=[c for c, _ in _shown()])
def test_each_shown_status_command_prints_the_lines_the_page_quotes(
    command: str, lines: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the page's scenario paths are the checkout's
    argv = shlex.split(command)
    assert argv[0] == "rollout"
    assert main(argv[1:]) == 0
    screen = _flat(capsys.readouterr().out)
    for line in lines:
        assert " ".join(line.split()) in screen, line


def test_the_payments_sequence_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    block = next(b for b in _section().split("```yaml\n")[1:] if "name: payments" in b).split("```")[0]
    path = tmp_path / "example.yaml"
    path.write_text(block)
    assert main(["validate", str(path)]) == 0
    assert f"{path}: valid" in capsys.readouterr().out


def test_the_pipelines_approval_is_a_valid_operator_command() -> None:
    """CHK-1, OPS-3: the message a pipeline publishes parses as the CLI's own and names nothing the
    approve action does not take."""
    block = _section().split("```json\n")[1].split("```")[0]
    command = OperatorCommand.model_validate_json(block)
    assert (command.action, command.stage, command.gate, command.issued_by, command.comment) == (
        "approve",
        "prod",
        GatePosition.BEFORE,
        "release-pipeline",
        "CAB-42",
    )
    assert command.misplaced_field() is None
