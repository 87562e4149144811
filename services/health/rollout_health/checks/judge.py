"""A check's outcome from its query's answer (pure): passed, failed or inconclusive, and why."""

from __future__ import annotations

import math

from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.checks import Check
from rollout_common.condition import evaluate, parse_condition
from rollout_health.checks.port import QueryAnswer

MAX_REASON_CHARS = 500


def judge(check: Check, answer: QueryAnswer) -> tuple[CheckOutcome, float | None, str]:
    """The outcome, the value to publish (None unless finite) and the reason.

    `failed` when the success condition is false or the failure condition true (CHK-2);
    `inconclusive` without a finite value to judge.
    """
    if answer.problem is not None:
        return CheckOutcome.INCONCLUSIVE, None, answer.problem[:MAX_REASON_CHARS]
    if answer.value is None:
        return CheckOutcome.INCONCLUSIVE, None, "the query returned no sample"
    value = answer.value
    if not math.isfinite(value):
        # NaN (0/0, no requests in the window) or an infinity judges nothing, and JSON has neither.
        return CheckOutcome.INCONCLUSIVE, None, f"the query returned {value}, not a finite number"
    if check.failure_condition is not None and evaluate(parse_condition(check.failure_condition), value):
        return CheckOutcome.FAILED, value, f"{value:g}: failureCondition {check.failure_condition} holds"
    if not evaluate(parse_condition(check.success_condition), value):
        return CheckOutcome.FAILED, value, f"{value:g}: successCondition {check.success_condition} does not hold"
    return CheckOutcome.PASSED, value, f"{value:g}: successCondition {check.success_condition} holds"


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
