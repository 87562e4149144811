"""Every mistake a person can make with the CLI: one sentence naming the fix, the exit code of the one
table (`rollout_cli.exit_codes`: 1 invalid input or rejected, 2 usage, 3 unreachable), no traceback."""

from __future__ import annotations

import uuid

import pytest

from rollout_adapters.kafka_bus import KafkaBus
from rollout_cli.main import main

# Nothing listens on port 1: connections are refused at once.
NO_KAFKA = "127.0.0.1:1"
NO_REDIS = "redis://127.0.0.1:1/0"
NEW = "1.31.13-gke.1023000"


def _error(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 1) -> str:
    try:
        exited = main(list(argv))
    except SystemExit as exc:  # argparse: usage, then the one line that says what is wrong
        exited = int(exc.code or 0)
    err = capsys.readouterr().err
    assert exited == code, err
    assert "Traceback" not in err
    lines = err.splitlines()
    return lines[-1]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (
            ["status", "--redis", NO_REDIS],
            3,
            f"error: cannot reach Redis at {NO_REDIS}: start Redis or point --redis (or ROLLOUT_REDIS_URL) at the "
            "planner's",
        ),
        (
            ["watch", "--plain", "--bootstrap", NO_KAFKA],
            3,
            f"error: cannot reach Kafka at {NO_KAFKA}: start the broker or point --bootstrap "
            "(or ROLLOUT_KAFKA_BOOTSTRAP) at a running one",
        ),
        (
            ["release", "--channel", "regular", "--target", f"1.30={NEW}", "--bootstrap", NO_KAFKA],
            3,
            f"error: cannot reach Kafka at {NO_KAFKA}: start the broker or point --bootstrap "
            "(or ROLLOUT_KAFKA_BOOTSTRAP) at a running one",
        ),
        (
            ["release", "--channel", "regular", "--target", "1.30", "--bootstrap", NO_KAFKA],
            1,
            "error: --target '1.30': expected MINOR=VERSION, e.g. 1.30=1.31.13-gke.1023000",
        ),
        (
            ["watch", "--count", "0"],
            2,
            "rollout watch: error: argument --count: expected a whole number of 1 or more, not '0'",
        ),
        (
            ["watch", "--count", "many"],
            2,
            "rollout watch: error: argument --count: expected a whole number of 1 or more, not 'many'",
        ),
        (
            ["demo", "--status-at", "soon"],
            1,
            "error: --status-at 'soon': expected a time after the start such as 2h or 9h10m",
        ),
        (
            ["demo", "--status-at", "90d"],
            1,
            "error: --status-at 90d is after the end of the run (60d after the start)",
        ),
    ],
    ids=[
        "redis-unreachable",
        "kafka-unreachable-watch",
        "kafka-unreachable-release",
        "bad-target",
        "count-zero",
        "count-not-a-number",
        "status-at-not-a-time",
        "status-at-after-the-end",
    ],
)
def test_one_sentence_and_its_exit_code(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    assert _error(capsys, *argv, code=code) == message


@pytest.mark.integration
def test_no_status_yet_says_to_start_the_planner(redis_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = f"t-empty-{uuid.uuid4().hex[:8]}"
    assert _error(capsys, "status", "--redis", redis_url, "--namespace", namespace, code=1) == (
        f"error: no status yet under namespace {namespace!r} at {redis_url}: start the planner and "
        "`rollout apply` a sequence, or check --redis and --namespace"
    )


@pytest.mark.integration
def test_watch_on_a_topic_that_does_not_exist_names_the_prefix(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"t-missing-{uuid.uuid4().hex[:8]}."
    assert _error(capsys, "watch", "--plain", "--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, code=1) == (
        f"error: topic '{prefix}rollout.progress' does not exist on {kafka_bootstrap}: start the planner first, "
        "or check --topic-prefix"
    )


def test_ctrl_c_ends_watch_with_exit_0(monkeypatch: pytest.MonkeyPatch) -> None:
    class Interrupted:
        async def poll(self, **_: object) -> list[object]:
            raise KeyboardInterrupt

        async def close(self) -> None:
            return None

    monkeypatch.setattr(KafkaBus, "consumer", lambda *_, **__: Interrupted())
    assert main(["watch", "--plain", "--bootstrap", NO_KAFKA]) == 0
