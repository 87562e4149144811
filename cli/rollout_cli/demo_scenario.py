"""The fleet `rollout demo` runs: the built-in scenario scaled to --clusters, or a scenario file."""

from __future__ import annotations

import argparse
from importlib import resources
from typing import Any

import yaml

from rollout_planner.simulation.scenario import Scenario, load_scenario

BUILTIN_CLUSTERS = 300
# demo.yaml names stg-canary-2 and prod-003 (the outage and the failure), so every generated group keeps
# at least three clusters whatever --clusters says.
MIN_PER_GROUP = 3


class DemoError(Exception):
    """Something the person asked for that cannot run; shown as one line, exit code 1 (invalid input)."""


def scenario_from(args: argparse.Namespace) -> Scenario:
    if args.scenario is not None:
        if args.clusters is not None:
            raise DemoError("--clusters sizes the built-in fleet; a --scenario file sets its own fleet")
        return load_scenario(args.scenario)
    clusters = BUILTIN_CLUSTERS if args.clusters is None else args.clusters
    return builtin_scenario(clusters=clusters)


def builtin_scenario(*, clusters: int = BUILTIN_CLUSTERS) -> Scenario:
    text = resources.files("rollout_cli").joinpath("scenarios/demo.yaml").read_text(encoding="utf-8")
    return Scenario.model_validate(scale_fleet(yaml.safe_load(text), clusters=clusters))


def scale_fleet(raw: dict[str, Any], *, clusters: int) -> dict[str, Any]:
    """The scenario with its `generate` counts scaled to `clusters` in total, same proportions."""
    groups = raw.get("generate", [])
    base = sum(group["count"] for group in groups)
    minimum = MIN_PER_GROUP * len(groups)
    if clusters < minimum:
        raise DemoError(f"--clusters must be at least {minimum} (the demo keeps {MIN_PER_GROUP} per group)")
    counts = [max(MIN_PER_GROUP, round(group["count"] * clusters / base)) for group in groups]
    # rounding drift goes to the largest group, so the total is exactly what was asked for
    largest = counts.index(max(counts))
    counts[largest] += clusters - sum(counts)
    scaled = dict(raw)
    scaled["generate"] = [{**group, "count": count} for group, count in zip(groups, counts, strict=True)]
    scaled["sequence"] = _scaled_thresholds(raw["sequence"], factor=clusters / base)
    return scaled


def _scaled_thresholds(sequence: dict[str, Any], *, factor: float) -> dict[str, Any]:
    """Scale autoPartitionThreshold with the fleet, so prod keeps several partitions at any size."""
    stages = []
    for stage in sequence["stages"]:
        strategy = stage.get("rolloutStrategy") or {}
        if "autoPartitionThreshold" in strategy:
            threshold = max(1, round(strategy["autoPartitionThreshold"] * factor))
            stage = {**stage, "rolloutStrategy": {**strategy, "autoPartitionThreshold": threshold}}
        stages.append(stage)
    return {**sequence, "stages": stages}
