"""Kafka ACLs for a secured `KafkaBroker`: create and list them over the Kafka protocol.

aiokafka's admin client has no public ACL calls, and Kafka 4's `AclCommand` lives in the
`kafka-tools` jar, which the broker does not need (so `deploy/kafka/pom.xml` does not fetch it).
The CreateAcls / DescribeAcls requests (API keys 30 / 29, version 1) are what both would send;
aiokafka ships their wire formats, and the broker answers each binding with an error code.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from aiokafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest  # type: ignore[import-untyped]

from rollout_devenv._proc import DevenvError


class Resource(enum.IntEnum):
    """Kafka's `ResourceType` codes."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class Pattern(enum.IntEnum):
    """Kafka's `PatternType` codes."""

    ANY = 1
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    """Kafka's `AclOperation` codes."""

    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


_ALLOW = 3
_ANY_PERMISSION = 1


@dataclass(frozen=True, slots=True)
class Acl:
    """ALLOW `principal` (`User:name`) to do `operation` on a resource, from any host."""

    principal: str
    resource: Resource
    name: str
    operation: Operation
    pattern: Pattern = Pattern.LITERAL

    def __str__(self) -> str:
        kind = "prefix" if self.pattern is Pattern.PREFIXED else "name"
        return f"{self.principal} {self.operation.name} {self.resource.name} {kind}={self.name!r}"


def allow(user: str, resource: Resource, name: str, *operations: Operation, prefixed: bool = False) -> list[Acl]:
    pattern = Pattern.PREFIXED if prefixed else Pattern.LITERAL
    return [Acl(f"User:{user}", resource, name, op, pattern) for op in operations]


async def create_acls(bootstrap: str, security: Mapping[str, Any], acls: Iterable[Acl]) -> None:
    """Create every ACL (as a principal allowed to: the super user); raise on the first refusal."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        for acl in acls:
            request = CreateAclsRequest(
                int(acl.resource), acl.name, int(acl.pattern), acl.principal, "*", int(acl.operation), _ALLOW
            )
            response = await admin._send_request(request)
            for code, message in response.creation_responses:
                if code:
                    raise DevenvError(f"creating ACL {acl} failed with error {code}: {message}")
    finally:
        await admin.close()


async def describe_acls(bootstrap: str, security: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """Every ALLOW/DENY binding as (principal, resource type, pattern type, resource name, operation)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **security)
    await admin.start()
    try:
        request = DescribeAclsRequest(1, None, int(Pattern.ANY), None, None, int(Operation.ANY), _ANY_PERMISSION)
        response = await admin._send_request(request)
    finally:
        await admin.close()
    error_code = response.error_code
    if error_code:
        raise DevenvError(f"describing ACLs failed with error {error_code}: {response.error_message}")
    found = []
    for resource_type, name, pattern_type, bindings in response.resources:
        for principal, _host, operation, _permission in bindings:
            found.append(
                (principal, Resource(resource_type).name, Pattern(pattern_type).name, name, Operation(operation).name)
            )
    return sorted(found)
