"""docs/operations.md shows only commands that exist: every `rollout ...` line parses with the
real CLI parser, every `python -m ...` names a runnable module, every `make` target is in the
Makefile, every ROLLOUT_* name is a setting and every file it points at is in the repository.
"""

from __future__ import annotations

import importlib.util
import re
import shlex

import pytest
from deploy_model import REPO, SETTINGS_BY_COMMAND, accepted_env_names

from rollout_cli.main import build_parser

OPERATIONS = REPO / "docs" / "operations.md"


def _shell_lines() -> list[str]:
    """The command lines of the page's ```sh blocks, without comments."""
    text = OPERATIONS.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL):
        for raw in block.splitlines():
            words = shlex.split(raw, comments=True)
            if words:
                lines.append(shlex.join(words))
    return lines


def _commands(program: str) -> list[list[str]]:
    """Each invocation of `program`, with leading VAR=value assignments and a trailing & dropped."""
    found = []
    for line in _shell_lines():
        words = shlex.split(line)
        while words and re.fullmatch(r"\w+=.*", words[0]):
            words = words[1:]
        if words and words[-1] == "&":
            words = words[:-1]
        for start, word in enumerate(words):
            # `kubectl -n rollout ...` names the namespace, not the program.
            if word == program and (start == 0 or words[start - 1] not in ("-n", "--namespace")):
                # up to a shell operator: `rollout ... || echo "exit $?"` shows the exit code
                rest = words[start:]
                ends = [i for i, w in enumerate(rest) if w in ("||", "&&", "|", ";")]
                found.append(rest[: ends[0]] if ends else rest)
                break
    return found


ROLLOUT_LINES = _commands("rollout")


def test_the_page_shows_cli_commands() -> None:
    assert len(ROLLOUT_LINES) >= 8


@pytest.mark.parametrize("argv", ROLLOUT_LINES, ids=[" ".join(a) for a in ROLLOUT_LINES])
def test_rollout_commands_parse(argv: list[str]) -> None:
    build_parser().parse_args(argv[1:])  # argparse exits (SystemExit) on an unknown command or option


def test_files_given_to_rollout_exist() -> None:
    for argv in ROLLOUT_LINES:
        for word in argv[1:]:
            if word.endswith((".yaml", ".yml")):
                assert (REPO / word).is_file(), f"{' '.join(argv)}: {word} does not exist"


def test_python_modules_exist() -> None:
    modules = [argv[2] for argv in _commands("python") if argv[1:2] == ["-m"]]
    assert modules
    for module in modules:
        assert importlib.util.find_spec(module) is not None, module


def test_make_targets_exist() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    text = OPERATIONS.read_text(encoding="utf-8")
    for target in set(re.findall(r"`make (\w[\w-]*)`", text)) | {argv[1] for argv in _commands("make")}:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"make {target}"


def test_setting_names_exist() -> None:
    known = set().union(*(accepted_env_names(model) for model in SETTINGS_BY_COMMAND.values()))
    named = set(re.findall(r"\bROLLOUT_[A-Z0-9_]+\b", OPERATIONS.read_text(encoding="utf-8")))
    assert named - known == set()


def test_repository_paths_exist() -> None:
    text = OPERATIONS.read_text(encoding="utf-8")
    for path in re.findall(r"`((?:deploy|docs|libs|tests)/[\w./-]+)`", text):
        assert (REPO / path).exists(), path
