"""CHK-2: a stage's checks as FORMAT.md names their fields, the defaults SPEC gives, errors naming the
stage and the check, and a sequence without checks that reads and writes exactly as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rollout_cli.main import main
from rollout_common import envelope
from rollout_common.checks import Check, CheckPhase
from rollout_common.errors import InvalidInputError
from rollout_common.sequence import Sequence, Stage
from rollout_common.topics.catalog import OPERATOR_COMMANDS

SELECTOR = {"matchLabels": {"env": "prod"}}
ERROR_RATE = {
    "name": "error-budget",
    "query": "sum(rate(http_errors_total[5m])) / sum(rate(http_requests_total[5m]))",
    "successCondition": "result < 0.01",
    "interval": "5m",
    "failureLimit": 1,
    "inconclusiveLimit": 2,
    "phases": ["progress", "soak"],
}


def test_chk2_the_format_example_reads_with_its_values() -> None:
    check = Check.model_validate(ERROR_RATE)
    assert (check.name, check.interval, check.failure_limit, check.inconclusive_limit) == ("error-budget", 300, 1, 2)
    assert check.phases == (CheckPhase.PROGRESS, CheckPhase.SOAK)
    assert check.failure_condition is None


def test_chk2_defaults_failure_limit_0_inconclusive_limit_2_both_phases() -> None:
    check = Check.model_validate({"name": "up", "query": "up", "successCondition": "result == 1", "interval": 30})
    assert (check.failure_limit, check.inconclusive_limit, check.phases) == (
        0,
        2,
        (CheckPhase.PROGRESS, CheckPhase.SOAK),
    )
    assert check.guards(CheckPhase.SOAK) and check.guards(CheckPhase.PROGRESS)
    assert not Check.model_validate({**ERROR_RATE, "phases": ["soak"]}).guards(CheckPhase.PROGRESS)


def _stage_error(checks: list[dict[str, object]]) -> str:
    with pytest.raises(ValidationError) as raised:
        Stage.model_validate({"name": "prod", "clusterSelector": SELECTOR, "checks": checks})
    (error,) = raised.value.errors()
    return str(error["msg"]).removeprefix("Value error, ")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"successCondition": "result < 0.01 &&"},
            "stage 'prod': check 'error-budget': successCondition 'result < 0.01 &&' at column 17: "
            "expected result or '(', found the end of the condition",
        ),
        (
            {"failureCondition": "error > 1"},
            "stage 'prod': check 'error-budget': failureCondition 'error > 1' at column 1: "
            "expected result or '(', found 'error'",
        ),
        ({"interval": "0s"}, "stage 'prod': check 'error-budget': interval: must be above zero, got '0s'"),
        (
            {"phases": ["soak", "soak"]},
            "stage 'prod': check 'error-budget': phases: name progress and soak at most once each",
        ),
        (
            {"failureLimit": -1},
            "stage 'prod': check 'error-budget': failureLimit: Input should be greater than or equal to 0",
        ),
    ],
)
def test_chk2_errors_name_the_stage_and_the_check(change: dict[str, object], message: str) -> None:
    assert _stage_error([{**ERROR_RATE, **change}]) == message


def test_chk2_check_names_are_unique_in_a_stage() -> None:
    assert _stage_error([ERROR_RATE, ERROR_RATE]) == "stage 'prod': check 'error-budget' is defined twice"


def test_chk2_a_sequence_without_checks_dumps_as_before() -> None:
    """No `checks` and no `prometheusUrl` keys: snapshots and sequence comparisons are unchanged."""
    plain = Sequence.model_validate({"stages": [{"name": "prod", "clusterSelector": SELECTOR}]})
    dumped = plain.model_dump(mode="json", by_alias=True)
    assert "prometheusUrl" not in dumped and "checks" not in dumped["stages"][0]
    guarded = Sequence.model_validate(
        {
            "prometheusUrl": "http://prometheus.monitoring:9090",
            "stages": [{"name": "prod", "clusterSelector": SELECTOR, "checks": [ERROR_RATE]}],
        }
    )
    again = Sequence.model_validate(guarded.model_dump(mode="json", by_alias=True))
    assert again == guarded and again.stages[0].checks[0].interval == 300


@pytest.mark.parametrize(
    "url", ["prometheus:9090", "http://p:9090/?query=up", "http://", "http://p\n", "http://user:pw@p:9090"]
)
def test_chk2_prometheus_url_is_an_http_base_url(url: str) -> None:
    with pytest.raises(ValidationError, match="prometheusUrl"):
        Sequence.model_validate({"prometheusUrl": url, "stages": [{"name": "p", "clusterSelector": SELECTOR}]})


def test_chk2_rollout_validate_names_stage_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "clusters:\n"
        "  - {name: prod-1, labels: {env: prod}, version: 1.30.5-gke.1000}\n"
        "sequence:\n"
        "  stages:\n"
        "    - name: prod\n"
        "      clusterSelector: {matchLabels: {env: prod}}\n"
        "      checks:\n"
        "        - {name: error-rate, query: 'x', successCondition: 'result <= ', interval: 5m}\n"
    )
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        "stage 'prod': check 'error-rate': successCondition 'result <= ' at column 11: "
        "expected a number after <=, found the end of the condition" in err
    )
    path.write_text(path.read_text().replace("'result <= '", "'result <= 0.01'"))
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "warning: sequence.stages.prod.checks.error-rate: simulation.metrics gives its query no value, "
        "so every evaluation is inconclusive (CHK-2)" in out
    )


def test_chk2_rollout_apply_refuses_a_bad_condition_before_publishing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file is read before any connection: the unreachable broker address is never dialled."""
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "clusters:\n"
        "  - {name: prod-1, labels: {env: prod}, version: 1.30.5-gke.1000}\n"
        "sequence:\n"
        "  stages:\n"
        "    - name: prod\n"
        "      clusterSelector: {matchLabels: {env: prod}}\n"
        "      checks:\n"
        "        - {name: error-rate, query: 'x', successCondition: 'result =< 0.01', interval: 5m}\n"
    )
    assert main(["apply", str(path), "--bootstrap", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err == (
        f"error: {path}: 1 problem(s)\n"
        "  - sequence.stages.0.checks: stage 'prod': check 'error-rate': successCondition 'result =< 0.01' "
        "at column 8: expected result, a number, an operator or a parenthesis, found '='\n"
    )


def test_chk2_a_sequence_change_with_a_bad_condition_is_refused_naming_stage_and_check() -> None:
    """On the wire (a sequence change from any client), the same error is the dead-letter reason (BUS-4)."""
    check = {**ERROR_RATE, "failureCondition": "result > 0.5 ||"}
    change = {
        "kind": "sequence_change",
        "commandId": "c-1",
        "sequence": {"stages": [{"name": "prod", "clusterSelector": SELECTOR, "checks": [check]}]},
    }
    headers = {
        "ce_specversion": b"1.0",
        "ce_id": b"e-1",
        "ce_source": b"a-pipeline",
        "ce_type": b"io.rollout.sequence_change.v1",
        "content-type": b"application/json",
    }
    with pytest.raises(InvalidInputError) as raised:
        envelope.decode(json.dumps(change).encode(), headers, OPERATOR_COMMANDS.models)
    assert str(raised.value) == (
        "invalid SequenceChange: sequence.stages.0.checks: Value error, stage 'prod': check 'error-budget': "
        "failureCondition 'result > 0.5 ||' at column 16: expected result or '(', found the end of the condition"
    )
