"""The least-privilege ACLs of every principal: the one table docs/security.md shows and the tests apply.

Names are the catalog's; a deployment applies them as they are, the tests with their topic prefix
in front of every topic and group name. Topics are created by an administrator (or `rollout
apply` run as one) and the services run with `ROLLOUT_CREATE_TOPICS=false`, so no service
principal needs CREATE or any cluster permission.
"""

from __future__ import annotations

from dataclasses import dataclass

from rollout_common.topics.catalog import (
    CHECK_RESULTS,
    DEAD_LETTER,
    HEARTBEATS,
    INVENTORY,
    OPERATOR_COMMANDS,
    PROGRESS,
    READINESS,
    RELEASE_TARGETS,
    STAGE_ADVANCE,
    UPGRADE_RESULTS,
)
from rollout_devenv.acls import Acl, Operation, Resource, allow

READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS = (
    Operation.READ,
    Operation.WRITE,
    Operation.CREATE,
    Operation.DESCRIBE,
    Operation.DESCRIBE_CONFIGS,
)

PRINCIPALS = ("planner", "executor", "health", "reporter", "checks", "operator", "intruder")

PLANNER_GROUP = "rollout-planner"
EXECUTOR_GROUP = "rollout-executors"
HEALTH_APP = "rollout-health"
WATCH_GROUP_PREFIX = "rollout-watch-"


@dataclass(frozen=True, slots=True)
class Grant:
    principal: str
    resource: Resource
    name: str
    operations: tuple[Operation, ...]
    prefixed: bool = False

    def acls(self, prefix: str) -> list[Acl]:
        return allow(self.principal, self.resource, prefix + self.name, *self.operations, prefixed=self.prefixed)

    def row(self) -> str:
        """The row of docs/security.md's table for this grant."""
        kind = self.resource.name.lower() + (" (prefix)" if self.prefixed else "")
        ops = ", ".join(op.name for op in self.operations)
        return f"| `{self.principal}` | {kind} | `{self.name}` | {ops} |"


def _topic(principal: str, topic: str, *ops: Operation) -> Grant:
    return Grant(principal, Resource.TOPIC, topic, ops)


GRANTS: tuple[Grant, ...] = (
    # planner: reads every input, writes its decisions, its progress and its dead letters
    *(
        _topic("planner", t.name, READ)
        for t in (RELEASE_TARGETS, OPERATOR_COMMANDS, UPGRADE_RESULTS, READINESS, CHECK_RESULTS, INVENTORY)
    ),
    *(_topic("planner", t.name, WRITE) for t in (STAGE_ADVANCE, PROGRESS, DEAD_LETTER)),
    Grant("planner", Resource.GROUP, PLANNER_GROUP, (READ,)),
    # executor: reads commands, writes results and dead letters
    _topic("executor", STAGE_ADVANCE.name, READ),
    _topic("executor", UPGRADE_RESULTS.name, WRITE),
    _topic("executor", DEAD_LETTER.name, WRITE),
    Grant("executor", Resource.GROUP, EXECUTOR_GROUP, (READ,)),
    # health monitor (faust): heartbeats in, readiness and dead letters out, plus its own
    # changelog and assignor topics, which faust creates under the app id
    _topic("health", HEARTBEATS.name, READ),
    _topic("health", READINESS.name, WRITE),
    _topic("health", DEAD_LETTER.name, WRITE),
    Grant("health", Resource.TOPIC, HEALTH_APP + "-", (READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS), prefixed=True),
    Grant("health", Resource.GROUP, HEALTH_APP, (READ,)),
    # health reporter: heartbeats out, nothing else
    _topic("reporter", HEARTBEATS.name, WRITE),
    # check runner: the planner's check series in (read without a group), results out (CHK-2)
    _topic("checks", PROGRESS.name, READ),
    _topic("checks", CHECK_RESULTS.name, WRITE),
    # operator (the CLI): releases, commands and inventory in, progress and dead letters out
    _topic("operator", RELEASE_TARGETS.name, WRITE),
    _topic("operator", OPERATOR_COMMANDS.name, WRITE),
    _topic("operator", INVENTORY.name, WRITE),
    _topic("operator", PROGRESS.name, READ),
    _topic("operator", DEAD_LETTER.name, READ),
    Grant("operator", Resource.GROUP, WATCH_GROUP_PREFIX, (READ,), prefixed=True),
    # intruder: authenticated, and nothing else
)


def acls(prefix: str = "") -> list[Acl]:
    return [acl for grant in GRANTS for acl in grant.acls(prefix)]
