"""The CLI teaches and answers by one table: every command's --help has examples and the exit codes,
every option has help text with an example; each subcommand exits 2 on a usage error, 3 when Kafka or
Redis is unreachable, 1 on invalid input, and never prints a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from rollout_cli.exit_codes import ExitCode, table
from rollout_cli.main import build_parser, main

NO_KAFKA = "127.0.0.1:1"
NO_REDIS = "redis://127.0.0.1:1/0"
V = "1.31.13-gke.1023000"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                if not has_subcommands:
                    yield " ".join((*path, name)), sub
                yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(build_parser()))


def test_the_top_level_help_shows_the_exit_codes() -> None:
    assert table() in build_parser().format_help()


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_examples_and_the_exit_codes(name: str) -> None:
    text = COMMANDS[name].format_help()
    assert table() in text
    examples = text.split("examples:\n")[1].split("\n\n")[0].splitlines()
    assert examples and all(line.strip().startswith(f"rollout {name}") for line in examples), examples


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_has_help_with_an_example(name: str) -> None:
    parser = COMMANDS[name]
    examples = parser.format_help().split("examples:\n")[1]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help != argparse.SUPPRESS, f"{name} {action.dest}: no help"
        flags = action.option_strings
        shown = any(flag in examples for flag in flags) or not flags
        assert shown or "e.g." in action.help or action.const is True, f"{name} {flags}: no example in {action.help!r}"


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_usage_error_exits_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit([*name.split(), "--no-such-option"], capsys)
    assert code == ExitCode.USAGE
    assert err.rstrip().endswith("unrecognized arguments: --no-such-option") or "required" in err


UNREACHABLE = {
    "release": ["--channel", "regular", "--target", f"1.30={V}", "--bootstrap", NO_KAFKA],
    "start": [V, "--bootstrap", NO_KAFKA],
    "pause": ["--all", "--bootstrap", NO_KAFKA],
    "resume": ["--rollout", "r-1", "--bootstrap", NO_KAFKA],
    "cancel": ["--all", "--bootstrap", NO_KAFKA],
    "retry": ["--rollout", "r-1", "--stage", "prod", "--bootstrap", NO_KAFKA],
    "soak": ["--stage", "prod", "--version", V, "--soak", "1h", "--bootstrap", NO_KAFKA, "--redis", NO_REDIS],
    "status": ["--redis", NO_REDIS],
    "watch": ["--plain", "--bootstrap", NO_KAFKA],
    "apply": ["tests/scenarios/gate1-25-mu5.yaml", "--bootstrap", NO_KAFKA, "--redis", NO_REDIS],
}


@pytest.mark.parametrize("name", sorted(UNREACHABLE))
def test_unreachable_infrastructure_exits_3(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit([name, *UNREACHABLE[name]], capsys)
    assert code == ExitCode.UNREACHABLE, err
    assert err.startswith("error: cannot reach ") and err.count("\n") == 1, err


INVALID = {
    "validate": ["no/such/file.yaml"],
    "plan": ["no/such/file.yaml"],
    "simulate": ["no/such/file.yaml"],
    "demo": ["--scenario", "no/such/file.yaml"],
    "import fleet": ["no/such/file.yaml"],
    "apply": ["no/such/file.yaml"],
    "release": ["--channel", "regular", "--target", "1.30=1.31", "--bootstrap", NO_KAFKA],
    "start": ["1.31", "--bootstrap", NO_KAFKA],
    "soak": ["--stage", "prod", "--version", V, "--soak", "31d", "--redis", NO_REDIS],
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_input_exits_1(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit([*name.split(), *INVALID[name]], capsys)
    assert code == ExitCode.REJECTED, err
    if name == "validate":  # it lists every problem of the file, one per line
        assert err.endswith("cannot read: No such file or directory\n"), err
    else:
        assert err.startswith("error: ") and err.count("\n") == 1, err


def test_a_malformed_argument_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit(["retry", "--rollout", "r-1", "--timeout", "0"], capsys)
    assert code == ExitCode.USAGE
    assert err.rstrip().endswith("argument --timeout: expected a number of seconds above 0, not '0'")


def test_an_operator_command_without_a_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """OPS-5: no rollout is changed by default."""
    for action in ("pause", "resume", "cancel", "retry"):
        code, err = _exit([action, "--bootstrap", NO_KAFKA], capsys)
        assert code == ExitCode.USAGE
        assert err.rstrip().endswith("one of the arguments --rollout --all is required")
