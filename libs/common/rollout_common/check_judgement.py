"""A check's outcome for a value its query returned (pure, CHK-2): the health service judges
Prometheus's answers with it, the simulator the scenario's metric values."""

from __future__ import annotations

import math

from rollout_common.check_results import CheckOutcome
from rollout_common.checks import Check
from rollout_common.condition import evaluate, parse_condition


def judge_value(check: Check, value: float | None) -> tuple[CheckOutcome, float | None, str]:
    """The outcome, the value to publish (None unless finite) and the reason.

    `failed` when the success condition is false or the failure condition true; `inconclusive`
    without a finite value to judge.
    """
    if value is None:
        return CheckOutcome.INCONCLUSIVE, None, "the query returned no sample"
    if not math.isfinite(value):
        # NaN (0/0, no requests in the window) or an infinity judges nothing, and JSON has neither.
        return CheckOutcome.INCONCLUSIVE, None, f"the query returned {value}, not a finite number"
    if check.failure_condition is not None and evaluate(parse_condition(check.failure_condition), value):
        return CheckOutcome.FAILED, value, f"{value:g}: failureCondition {check.failure_condition} holds"
    if not evaluate(parse_condition(check.success_condition), value):
        return CheckOutcome.FAILED, value, f"{value:g}: successCondition {check.success_condition} does not hold"
    return CheckOutcome.PASSED, value, f"{value:g}: successCondition {check.success_condition} holds"


__all__ = ["judge_value"]
