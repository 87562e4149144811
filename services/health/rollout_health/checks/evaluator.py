"""One evaluation of one check: ask the query, judge the answer, as a `check_result` event."""

from __future__ import annotations

from collections.abc import Callable

from rollout_common.check_results import CheckResult
from rollout_common.checks import Check
from rollout_common.sequence import Sequence
from rollout_health.checks.judge import check_result
from rollout_health.checks.port import InstantQuery
from rollout_health.settings import ChecksSettings


async def evaluate_check(
    source: InstantQuery,
    check: Check,
    *,
    rollout_id: str,
    stage: str,
    base_url: str,
    clock: Callable[[], float],
) -> CheckResult:
    """Never raises for Prometheus's troubles: those are `inconclusive` results with the reason.

    The observed time is when the query was asked (BUS-7 orders results by it), read before it.
    """
    observed_at = clock()
    answer = await source.ask(check.query, base_url=base_url)
    return check_result(check, answer, rollout_id=rollout_id, stage=stage, observed_at=observed_at)


def prometheus_base_url(sequence: Sequence, settings: ChecksSettings) -> str:
    """The sequence's own Prometheus when it names one, else the service's default."""
    return sequence.prometheus_url or settings.prometheus_url
