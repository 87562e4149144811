"""The small fleet several Kafka tests run a planner on: canary (can-1), then prod (prod-1), each
stage soaking a day; shared by every test folder (tests/ is on the path)."""

from __future__ import annotations

from rollout_common.fleet import Cluster
from rollout_common.sequence import Sequence
from rollout_planner.engine import EngineState, new_state

OLD = "1.30.5-gke.1000"
NEW = "1.31.13-gke.1023000"


def canary_prod_sequence(name: str) -> Sequence:
    return Sequence.model_validate(
        {
            "name": name,
            "channel": "regular",
            "stages": [
                {"name": "canary", "clusterSelector": {"matchLabels": {"env": "canary"}}, "soak": "1d"},
                {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}, "soak": "1d"},
            ],
        }
    )


def canary_prod_fleet() -> list[Cluster]:
    return [
        Cluster(name=name, labels={"env": env}, version=OLD) for name, env in (("can-1", "canary"), ("prod-1", "prod"))
    ]


def canary_prod_state(name: str) -> EngineState:
    """The planner's first state for this fleet, under sequence `name`."""
    return new_state(canary_prod_sequence(name), canary_prod_fleet())
