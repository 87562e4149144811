"""Commands the planner would refuse are refused by the CLI before anything is published (exit 1,
naming the field and the limit), by the same bounds the planner's decoder applies (BUS-4): a
70,000-character rollout id used to be published, dead-lettered, and reported as unanswered (exit 4)."""

from __future__ import annotations

import pytest

from rollout_cli.exit_codes import ExitCode
from rollout_cli.main import main
from rollout_common import envelope
from rollout_common.errors import InvalidInputError
from rollout_common.events import OperatorCommand
from rollout_common.json_bounds import MAX_STRING_BYTES
from rollout_common.topics.catalog import OPERATOR_COMMANDS

# Nothing listens here: a command that got as far as connecting would exit 3, not 1.
NO_KAFKA = "127.0.0.1:1"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*argv, "--bootstrap", NO_KAFKA])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_a_rollout_id_over_the_string_bound_is_refused_before_publishing(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["pause", "--rollout", "x" * 70_000], capsys)
    assert code == ExitCode.REJECTED
    assert "rolloutId is 70,002 bytes as JSON, over the limit of 65,536 for one string; nothing was published" in err


def test_an_event_id_over_the_header_bound_is_refused_before_publishing(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["release", "--channel", "regular", "--target", "1.30=1.31.13-gke.1023000", "--id", "r" * 20_000]
    code, err = _run(argv, capsys)
    assert code == ExitCode.REJECTED
    assert "(ce_id 20,000), over the limit of 16,384; nothing was published" in err


@pytest.mark.parametrize("length", [MAX_STRING_BYTES - 2, MAX_STRING_BYTES - 1])
def test_the_cli_refuses_exactly_what_the_planners_decoder_refuses(length: int) -> None:
    """The bound is the decoder's: a rollout id of 65,534 characters (65,536 bytes with its quotes)
    passes both, one more character fails both."""
    command = OperatorCommand(command_id="c1", action="pause", rollout_id="x" * length)
    value, headers = envelope.encode(command, event_id="c1", source="test", at=0.0)
    problem = envelope.size_problem(value, headers)
    try:
        envelope.decode(value, headers, OPERATOR_COMMANDS.models)
        refused = False
    except InvalidInputError:
        refused = True
    assert (problem is not None, refused) == ((length > MAX_STRING_BYTES - 2),) * 2


def test_a_pause_takes_no_stage(capsys: pytest.CaptureFixture[str]) -> None:
    """OPS-1: pause is for a whole rollout; narrowing it is a usage error, not a whole-rollout pause."""
    with pytest.raises(SystemExit) as usage:
        main(["pause", "--rollout", "main-1", "--stage", "prod"])
    assert usage.value.code == ExitCode.USAGE
    assert "unrecognized arguments: --stage prod" in capsys.readouterr().err
