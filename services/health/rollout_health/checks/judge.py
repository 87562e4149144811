"""A check's outcome from its query's answer (pure): passed, failed or inconclusive, and why."""

from __future__ import annotations

from rollout_common.check_judgement import judge_value
from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.checks import Check
from rollout_health.checks.port import QueryAnswer

MAX_REASON_CHARS = 500


def judge(check: Check, answer: QueryAnswer) -> tuple[CheckOutcome, float | None, str]:
    """The outcome, the value to publish (None unless finite) and the reason.

    `failed` when the success condition is false or the failure condition true (CHK-2);
    `inconclusive` without a finite value to judge.
    """
    if answer.problem is not None:
        return CheckOutcome.INCONCLUSIVE, None, answer.problem[:MAX_REASON_CHARS]
    return judge_value(check, answer.value)


def check_result(check: Check, answer: QueryAnswer, *, rollout_id: str, stage: str, observed_at: float) -> CheckResult:
    outcome, value, reason = judge(check, answer)
    return CheckResult(
        rollout_id=rollout_id,
        stage=stage,
        check=check.name,
        observed_at=observed_at,
        value=value,
        outcome=outcome,
        reason=reason,
    )
