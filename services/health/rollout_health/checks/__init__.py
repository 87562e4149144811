"""Metric checks in production (CHK-2): follow the check series the planner announces, ask Prometheus
each check's query on the series' grid, judge its first sample by the check's conditions and
publish every result (`runner`)."""

from rollout_health.checks.evaluator import evaluate_check, prometheus_base_url
from rollout_health.checks.judge import judge
from rollout_health.checks.port import InstantQuery, QueryAnswer
from rollout_health.checks.prometheus import PrometheusQuery
from rollout_health.checks.series import RunningSeries, SeriesKey, announced, due, next_due_at

__all__ = [
    "InstantQuery",
    "PrometheusQuery",
    "QueryAnswer",
    "RunningSeries",
    "SeriesKey",
    "announced",
    "due",
    "evaluate_check",
    "judge",
    "next_due_at",
    "prometheus_base_url",
]
