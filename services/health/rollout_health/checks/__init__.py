"""Metric checks in production (CHK-2): ask Prometheus a check's query, judge its first sample by the
check's conditions, and say which checks are due."""

from rollout_health.checks.evaluator import evaluate_check, prometheus_base_url
from rollout_health.checks.judge import judge
from rollout_health.checks.port import InstantQuery, QueryAnswer
from rollout_health.checks.prometheus import PrometheusQuery
from rollout_health.checks.schedule import DueCheck, GuardedStage, SeriesKey, due_checks, live_series, next_due_at

__all__ = [
    "DueCheck",
    "GuardedStage",
    "InstantQuery",
    "PrometheusQuery",
    "QueryAnswer",
    "SeriesKey",
    "due_checks",
    "evaluate_check",
    "judge",
    "live_series",
    "next_due_at",
    "prometheus_base_url",
]
