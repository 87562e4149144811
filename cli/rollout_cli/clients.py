"""The Kafka and Redis clients of a command, from its options and the services' shared connection
settings; their errors as the person sees them (one line, the exit code that fits).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from rollout_adapters import connections
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli import ctrl_c
from rollout_cli.exit_codes import BadInputError, UnreachableError
from rollout_common.connection_settings import RedisServiceSettings, load, masked_url
from rollout_common.errors import InvalidInputError, RolloutError, TransientError, UnknownTopicError

# Long enough for a broker that is up but slow; short enough that a wrong address fails fast.
CONNECT_TIMEOUT_S = 20.0


def connection_settings(args: argparse.Namespace) -> RedisServiceSettings:
    """The services' shared connection settings (`ROLLOUT_KAFKA_SECURITY__*`, `ROLLOUT_REDIS_USERNAME`,
    `ROLLOUT_REDIS_PASSWORD`, ...) from the environment, with this command's options on top."""
    try:
        settings = load(RedisServiceSettings, what="connection settings")
    except InvalidInputError as exc:
        raise BadInputError(str(exc)) from exc
    # The options win: their defaults already come from the same variables.
    return settings.model_copy(
        update={
            "kafka_bootstrap": args.bootstrap,
            "topic_prefix": args.topic_prefix,
            "redis_url": args.redis,
            "redis_namespace": args.namespace,
        }
    )


def kafka_bus(args: argparse.Namespace) -> KafkaBus:
    return connections.kafka_bus(connection_settings(args), client_id=args.source)


def redis_store(args: argparse.Namespace) -> RedisStore:
    return connections.redis_store(connection_settings(args))


@contextlib.contextmanager
def kafka_errors(args: argparse.Namespace, *, topic: str, hint: str = "start the planner first") -> Iterator[None]:
    """Kafka's errors as the person sees them: one line each, with the exit code that fits."""
    try:
        yield
    except UnknownTopicError as exc:
        raise BadInputError(
            f"topic {topic!r} does not exist on {args.bootstrap}: {hint}, or check --topic-prefix"
        ) from exc
    except (TransientError, TimeoutError) as exc:
        raise UnreachableError(_kafka_unreachable(args)) from exc
    except RolloutError as exc:  # a refused login or a missing ACL: one line, not a traceback
        raise BadInputError(f"Kafka at {args.bootstrap} refused: {short(exc)}") from exc


def _kafka_unreachable(args: argparse.Namespace) -> str:
    return (
        f"cannot reach Kafka at {args.bootstrap}: start the broker or point --bootstrap "
        "(or ROLLOUT_KAFKA_BOOTSTRAP) at a running one"
    )


async def with_store(args: argparse.Namespace, call: Callable[[RedisStore], Awaitable[Any]]) -> Any:
    store = redis_store(args)
    redis = masked_url(args.redis)  # a password in the URL stays out of the message
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            return await call(store)
    except (TransientError, TimeoutError) as exc:
        raise UnreachableError(
            f"cannot reach Redis at {redis}: start Redis or point --redis (or ROLLOUT_REDIS_URL) at the planner's"
        ) from exc
    except RolloutError as exc:
        raise BadInputError(f"Redis at {redis} refused: {short(exc)}") from exc
    finally:
        await ctrl_c.closed(store.close())


def short(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


__all__ = [
    "CONNECT_TIMEOUT_S",
    "connection_settings",
    "kafka_bus",
    "kafka_errors",
    "redis_store",
    "short",
    "with_store",
]
