"""One sentence per kind of wait, with its numbers and names (STAT-5): what `describe_waits` says."""

from __future__ import annotations

from collections.abc import Callable

from rollout_common.status import StageReason, WaitRule
from rollout_common.window import from_epoch
from rollout_planner.engine.gates.budgets import budget_message

Numbers = dict[str, object]

_CHECK_HALTS = (StageReason.CHECK_FAILED.value, StageReason.CHECK_INCONCLUSIVE.value)


def wait_message(rule: str, partition: str | None, numbers: Numbers) -> str:
    """The sentence for one recorded wait; a rule without one is said by its name."""
    says = _MESSAGES.get(rule)
    return rule if says is None else says(partition, numbers)


def _listed(numbers: Numbers, key: str) -> str:
    listed = numbers.get(key, [])
    return ", ".join(map(str, listed)) if isinstance(listed, list) else ""


def _at(numbers: Numbers, key: str, *, unknown: str) -> str:
    at = numbers.get(key)
    return from_epoch(float(at)).isoformat() if isinstance(at, (int, float)) else unknown


def _gate_1(partition: str | None, numbers: Numbers) -> str:
    return (
        f"partition {partition}: {numbers['unavailable']} clusters unavailable, maxUnavailable is "
        f"{numbers['maxUnavailable']}; the next batch waits until fewer are unavailable (GATE-1)"
    )


def _gate_3(partition: str | None, numbers: Numbers) -> str:
    return (
        f"{numbers['notReadyPartitions']} earlier partition(s) NotReady "
        f"({_listed(numbers, 'partitions')}) > maxUnavailablePartitions "
        f"{numbers['maxUnavailablePartitions']}; partition {partition} and later ones wait (GATE-3)"
    )


def _gate_6(partition: str | None, numbers: Numbers) -> str:
    return f"{numbers['inFlight']} clusters upgrading, maxConcurrent is {numbers['maxConcurrent']} (GATE-6)"


def _maintenance(partition: str | None, numbers: Numbers) -> str:
    return (
        f"{numbers['waiting']} cluster(s) outside their maintenance window or inside an exclusion "
        f"({_listed(numbers, 'clusters')}); the first can start at {_at(numbers, 'nextOpen', unknown='never')} "
        "(WIN-1..4)"
    )


def _partitions_not_ready(partition: str | None, numbers: Numbers) -> str:
    return (
        f"every eligible cluster is upgraded, but partitions {_listed(numbers, 'partitions')} are NotReady; "
        "the soak starts when they are Ready (SOAK-2)"
    )


def _soaking(partition: str | None, numbers: Numbers) -> str:
    return (
        f"{numbers['remaining']} cluster(s) still to upgrade cannot start now (failed, deprecated API, "
        "or waiting for a window or their control plane); the stage soaks anyway at "
        f"{_at(numbers, 'forcedSoakAt', unknown='?')} (SOAK-4)"
    )


def _budget(partition: str | None, numbers: Numbers) -> str:
    return budget_message(numbers)


def _check(partition: str | None, numbers: Numbers) -> str:
    return f"rollout {numbers.get('rollout')} waits for {numbers.get('text')} (CHK-2)"


def _paused(partition: str | None, numbers: Numbers) -> str:
    if numbers.get("reason") in _CHECK_HALTS:
        return (
            f"halted by a metric check ({numbers.get('reason')}); no new batches, nothing qualified until the "
            "rollout is resumed (CHK-2, OPS-1)"
        )
    return f"rollout paused ({numbers.get('reason')}); no new batches (OPS-1)"


_MESSAGES: dict[str, Callable[[str | None, Numbers], str]] = {
    WaitRule.GATE_1_MAX_UNAVAILABLE.value: _gate_1,
    WaitRule.GATE_3_MAX_UNAVAILABLE_PARTITIONS.value: _gate_3,
    WaitRule.GATE_6_MAX_CONCURRENT.value: _gate_6,
    WaitRule.WIN_MAINTENANCE.value: _maintenance,
    WaitRule.SOAK_2_PARTITIONS_NOT_READY.value: _partitions_not_ready,
    WaitRule.SOAK_2_SOAKING.value: _soaking,
    WaitRule.CHK_4_DISRUPTION_BUDGET.value: _budget,
    WaitRule.CHK_2_CHECK.value: _check,
    WaitRule.OPS_1_PAUSED.value: _paused,
}
