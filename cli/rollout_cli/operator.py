"""Commands that talk to a running system: publish releases and operator commands, read status.

Every message goes through the same envelope and topic catalog as the services use. Mistakes a
person can make (a bad version, Kafka or Redis unreachable, a missing file) end in one line on
stderr and the exit code of `rollout_cli.exit_codes`, never a traceback. Operator commands wait
for the planner's acknowledgement (OPS-3) unless told not to.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.live import Live

from rollout_adapters import connections
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli import ctrl_c, help_text
from rollout_cli.acks import AckListener, Answer
from rollout_cli.dashboard import ProgressCount, ProgressModel, spinner, status_view
from rollout_cli.exit_codes import BadInputError, CliError, ExitCode, NoAnswerError, UnreachableError
from rollout_cli.schema_export import write_asyncapi, write_schemas
from rollout_common import envelope
from rollout_common.connection_settings import RedisServiceSettings, load, masked_url
from rollout_common.errors import InvalidInputError, RolloutError, TransientError, UnknownTopicError
from rollout_common.events import InventoryChange, OperatorCommand, ReleaseTarget, SequenceChange, StartRollout
from rollout_common.ports import Consumer, Record
from rollout_common.topics import ALL
from rollout_common.topics.asyncapi import ASYNCAPI_VERSION
from rollout_common.topics.catalog import INVENTORY, OPERATOR_COMMANDS, PROGRESS, RELEASE_TARGETS, TopicDef
from rollout_planner.service.checkpoint import SEQUENCE_KEY, STATUS_KEY
from rollout_planner.simulation.scenario import ScenarioError, load_scenario

# Long enough for a broker that is up but slow; short enough that a wrong address fails fast.
_CONNECT_TIMEOUT_S = 20.0
_PIPED_WIDTH = 160
_PUBLISH_CHUNK = 500
_RECENT_EVENTS = 6


# -- registration ---------------------------------------------------------------------------

_TARGET_HELP = (
    "Name the rollout with --rollout ID (as `rollout status` lists it), or say --all for every active "
    "rollout: a command never applies to every rollout by default (OPS-5)."
)
_ACK_HELP = (
    "The command waits for the planner's acknowledgement on the progress topic and prints whether it "
    "was accepted or rejected, and why (OPS-3); --no-wait only publishes it."
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = _common_options()
    acked = _ack_options()
    release = help_text.command(
        sub,
        "release",
        parents=[common],
        summary="publish a release target: clusters on a minor may now go to a version (START-1)",
        description="Publishes a release target on rollout.release-targets. A planner following the channel "
        "starts a rollout of it through the sequence's stages; the same --id twice starts one rollout.",
        examples=[
            "rollout release --channel regular --target 1.30=1.31.13-gke.1023000",
            "rollout release --channel regular --target 1.30=1.31.13-gke.1023000 --target 1.32=1.33.5-gke.1162000 "
            "--id rel-2026-12",
        ],
    )
    release.add_argument("--channel", required=True, help="release channel the sequence follows, e.g. regular")
    release.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="MINOR=VERSION",
        help="e.g. 1.30=1.31.13-gke.1023000; repeat for several minors",
    )
    release.add_argument(
        "--id", help="event id, e.g. rel-2026-12; the same id twice starts one rollout (default: a new id)"
    )
    release.set_defaults(handler=_handler(_release))

    start = help_text.command(
        sub,
        "start",
        parents=[common],
        summary="start an on-demand rollout of one version (START-2)",
        description="Publishes an on-demand rollout of one version to every stage in order, for the tracks "
        "chosen (control plane, nodes or both).",
        examples=["rollout start 1.31.13-gke.1023000", "rollout start 1.31.13-gke.1023000 --tracks nodes"],
    )
    start.add_argument("version", help="the version to roll out, e.g. 1.31.13-gke.1023000")
    start.add_argument(
        "--tracks", default="controlPlane,nodes", help="controlPlane, nodes or both, e.g. --tracks nodes"
    )
    start.add_argument("--id", help="event id, e.g. start-hotfix-1 (default: a new id)")
    start.set_defaults(handler=_handler(_start))

    for action, what, rule in (
        ("pause", "stop handing out new batches; upgrades already running finish", "OPS-1"),
        ("resume", "hand out batches again after a pause", "OPS-1"),
        ("cancel", "stop a rollout for good (CANCELLED); running upgrades finish", "OPS-1"),
    ):
        parser = help_text.command(
            sub,
            action,
            parents=[common, acked],
            summary=f"{action} a rollout: {what} ({rule})",
            description=f"{action.capitalize()}: {what}. {_TARGET_HELP}\n\n{_ACK_HELP}",
            examples=[f"rollout {action} --rollout prod-1", f"rollout {action} --all --no-wait"],
        )
        _target_options(parser)
        parser.set_defaults(handler=_handler(_operator_action), action=action)

    retry = help_text.command(
        sub,
        "retry",
        parents=[common, acked],
        summary="retry failed upgrades of a rollout, one stage or one cluster (OPS-4)",
        description="The failed clusters become OUT_OF_SYNC again and go out in later batches under the same "
        "gates; executors run a retried upgrade once more even though its failure is recorded. Without "
        f"--stage or --cluster every failed upgrade of the rollout is retried. {_TARGET_HELP}\n\n{_ACK_HELP}",
        examples=[
            "rollout retry --rollout prod-1 --cluster prod-eu-07",
            "rollout retry --rollout prod-1 --stage prod",
            "rollout retry --all",
        ],
    )
    _target_options(retry)
    narrow = retry.add_mutually_exclusive_group()
    narrow.add_argument("--stage", help="retry only this stage's failed upgrades, e.g. prod")
    narrow.add_argument("--cluster", help="retry only this cluster's failed upgrades, e.g. prod-eu-07")
    retry.set_defaults(handler=_handler(_operator_action), action="retry")

    soak = help_text.command(
        sub,
        "soak",
        parents=[common, acked],
        summary="set or clear a stage's soak for one version (OPS-2)",
        description="Overrides how long a stage soaks one version before qualifying it for the next stage; "
        f"a soak under way is recomputed from when it began.\n\n{_ACK_HELP}",
        examples=[
            "rollout soak --stage canary --version 1.31.13-gke.1023000 --soak 12h",
            "rollout soak --stage canary --version 1.31.13-gke.1023000 --clear",
        ],
    )
    soak.add_argument("--stage", required=True, help="stage name, e.g. canary")
    soak.add_argument("--version", required=True, help="the version the override is for, e.g. 1.31.13-gke.1023000")
    soak_choice = soak.add_mutually_exclusive_group(required=True)
    soak_choice.add_argument("--soak", help="duration from 0d to 30d, e.g. 12h or 3d")
    soak_choice.add_argument("--clear", action="store_true", help="remove the override, e.g. --clear")
    soak.set_defaults(handler=_handler(_soak))

    status = help_text.command(
        sub,
        "status",
        parents=[common],
        summary="one screen: rollouts, stages, partitions, why they wait, next wake-up (STAT-5)",
        description="Reads the status document the planner keeps in Redis and shows it; --json prints it as "
        "it is stored.",
        examples=["rollout status", "rollout status --stage prod", "rollout status --json"],
    )
    status.add_argument("--json", action="store_true", help="print the raw status document, e.g. for jq")
    status.add_argument("--stage", help="show this stage only, e.g. prod")
    status.set_defaults(handler=_handler(_status))

    watch = help_text.command(
        sub,
        "watch",
        parents=[common],
        summary="live status screen moved on by progress events (one line per event with --plain)",
        description="Follows the progress topic: transitions, waits, acknowledgements. Ctrl-C stops it (exit 0).",
        examples=["rollout watch", "rollout watch --plain --from-beginning --count 20"],
    )
    watch.add_argument("--from-beginning", action="store_true", help="replay the topic's history first")
    watch.add_argument("--count", type=_positive_int, help="exit after this many events, e.g. --count 20")
    watch.add_argument(
        "--plain", action="store_true", help="one line per event (the default when stdout is not a terminal)"
    )
    watch.set_defaults(handler=_handler(_watch), on_ctrl_c=ExitCode.OK)

    apply = help_text.command(
        sub,
        "apply",
        parents=[common, acked],
        summary="publish a fleet file's clusters and groups to the inventory; send its sequence to the planner",
        description="Publishes every cluster (and cluster group) of a scenario/fleet file to the inventory "
        "topic. A planner already running gets the sequence as a change (SEQ-7) and answers whether it "
        "applied or refused it; the sequence is then stored for a planner that starts afresh. Without a "
        "running planner the sequence is stored for it to read when it starts.",
        examples=["rollout apply fleet.yaml", "rollout apply fleet.yaml --timeout 60"],
    )
    apply.add_argument("file", type=Path, help="scenario or fleet file, e.g. fleet.yaml (see `rollout validate`)")
    apply.set_defaults(handler=_handler(_apply))

    schemas_sub = help_text.group(
        sub,
        "schemas",
        dest="schemas_command",
        metavar="ACTION",
        summary="JSON Schemas and the AsyncAPI document of every event (BUS-2)",
        description="Writes what any Kafka client needs to produce and read our events.",
        examples=["rollout schemas export schemas/", "rollout schemas asyncapi asyncapi.json"],
    )
    export = help_text.command(
        schemas_sub,
        "export",
        summary="write one JSON Schema per event type, plus index.json",
        description="One draft 2020-12 JSON Schema per event type, with the same patterns and bounds the "
        "services check, and index.json listing each topic's schemas.",
        examples=["rollout schemas export schemas/"],
    )
    export.add_argument("dir", type=Path, help="folder to write, e.g. schemas/ (created if missing)")
    export.set_defaults(handler=_handler(_export_schemas))
    asyncapi = help_text.command(
        schemas_sub,
        "asyncapi",
        summary="write the AsyncAPI 3 document of every topic and message",
        description="Channels, messages (with their CloudEvents headers) and operations of every topic, from "
        "the topic catalog the services use.",
        examples=["rollout schemas asyncapi asyncapi.json"],
    )
    asyncapi.add_argument("file", type=Path, help="file to write, e.g. asyncapi.json")
    asyncapi.set_defaults(handler=_handler(_write_asyncapi))


def _target_options(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--rollout", metavar="ID", help="the rollout, e.g. prod-1 (`rollout status` lists them)")
    target.add_argument("--all", action="store_true", help="every active rollout, said explicitly, e.g. --all")


def _ack_options() -> argparse.ArgumentParser:
    acked = argparse.ArgumentParser(add_help=False)
    acked.add_argument(
        "--no-wait", action="store_true", help="publish and exit 0 without waiting for the planner's answer"
    )
    acked.add_argument(
        "--timeout",
        type=_positive_float,
        default=float(os.environ.get("ROLLOUT_ACK_TIMEOUT_S", "30")),
        metavar="SECONDS",
        help="how long to wait for the answer, e.g. --timeout 60 (env ROLLOUT_ACK_TIMEOUT_S; default 30)",
    )
    return acked


# The options every command that reaches Kafka or Redis takes: (flag, environment variable that
# gives its default, default without it, help). The help names the variable.
_CONNECTION_OPTIONS = (
    ("--bootstrap", "ROLLOUT_KAFKA_BOOTSTRAP", "localhost:9092",
     "Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092"),
    ("--redis", "ROLLOUT_REDIS_URL", "redis://localhost:6379/0", "Redis URL, e.g. redis://redis:6379/0"),
    ("--topic-prefix", "ROLLOUT_TOPIC_PREFIX", "", "put before every topic and group name, e.g. staging."),
    ("--namespace", "ROLLOUT_REDIS_NAMESPACE", "rollout", "the planner's Redis key namespace, e.g. rollout"),
    ("--source", "ROLLOUT_SOURCE", "rollout-cli", "ce_source of what this command publishes, e.g. ci/pipeline-42"),
)  # fmt: skip


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    for flag, variable, fallback, what in _CONNECTION_OPTIONS:
        common.add_argument(flag, default=os.environ.get(variable, fallback), help=f"{what} (env {variable})")
    return common


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, not {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {text!r}")
    return value


def _handler(run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> Callable[[argparse.Namespace], int]:
    """Run an async command; turn the errors a person can act on into one line and their exit code.

    Ctrl-C exits with the command's `on_ctrl_c`: 130 by convention, 0 for `watch`, where it is how
    one stops (`rollout_cli.main`).
    """

    def handle(args: argparse.Namespace) -> int:
        # aiokafka logs each failed connection attempt; the one line below says it better.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        try:
            with ctrl_c.held():
                return ctrl_c.run(run(args))
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return int(exc.code)
        except (KeyboardInterrupt, ctrl_c.StoppedByCtrlCError):
            return int(getattr(args, "on_ctrl_c", ExitCode.INTERRUPTED))

    return handle


# -- clients ----------------------------------------------------------------------------------


def _connection_settings(args: argparse.Namespace) -> RedisServiceSettings:
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


def _bus(args: argparse.Namespace) -> KafkaBus:
    return connections.kafka_bus(_connection_settings(args), client_id=args.source)


def _store(args: argparse.Namespace) -> RedisStore:
    return connections.redis_store(_connection_settings(args))


# -- publishing -------------------------------------------------------------------------------


async def _release(args: argparse.Namespace) -> int:
    targets: dict[str, str] = {}
    for item in args.target:
        minor, sep, version = item.partition("=")
        if not sep or not minor or not version:
            raise BadInputError(f"--target {item!r}: expected MINOR=VERSION, e.g. 1.30=1.31.13-gke.1023000")
        targets[minor.strip()] = version.strip()
    event_id = args.id or f"release-{uuid.uuid4().hex[:12]}"
    model = _validated(ReleaseTarget, event_id=event_id, channel=args.channel, targets=targets)
    await _publish(args, RELEASE_TARGETS, [(model, event_id)])
    print(f"published release target {event_id} ({args.channel}: {_pairs(targets)})")
    return 0


async def _start(args: argparse.Namespace) -> int:
    tracks = tuple(t.strip() for t in args.tracks.split(",") if t.strip())
    event_id = args.id or f"start-{uuid.uuid4().hex[:12]}"
    model = _validated(StartRollout, event_id=event_id, version=args.version, tracks=tracks)
    await _publish(args, RELEASE_TARGETS, [(model, event_id)])
    print(f"published on-demand rollout {event_id} of {args.version} ({', '.join(tracks)})")
    return 0


async def _operator_action(args: argparse.Namespace) -> int:
    narrowed = {"stage": getattr(args, "stage", None), "cluster": getattr(args, "cluster", None)}
    command = _command(action=args.action, rollout_id=args.rollout, all_rollouts=args.all, **narrowed)
    target = f"rollout {args.rollout}" if args.rollout else "every active rollout"
    scope = "".join(f", {name} {value}" for name, value in narrowed.items() if value)
    return await _send_command(args, command, what=f"{args.action} {command.command_id} for {target}{scope}")


async def _soak(args: argparse.Namespace) -> int:
    document = await _status_if_any(args)
    if document is not None:
        _check_stage(args.stage, document)
    command = _command(
        action="soak_override", stage=args.stage, version=args.version, soak=None if args.clear else args.soak
    )
    what = "cleared" if args.clear else f"set to {args.soak}"
    return await _send_command(
        args, command, what=f"soak override {command.command_id}: {args.stage} / {args.version} {what}"
    )


def _command(**fields: Any) -> OperatorCommand:
    command: OperatorCommand = _validated(
        OperatorCommand, command_id=f"cmd-{uuid.uuid4().hex[:12]}", issued_by=_user(), **fields
    )
    misplaced = command.misplaced_field()
    if misplaced is not None:  # the planner would reject it (OPS-3); said before publishing
        raise BadInputError(misplaced)
    return command


def _user() -> str:
    return os.environ.get("USER") or "unknown"


async def _send_command(args: argparse.Namespace, command: OperatorCommand | SequenceChange, *, what: str) -> int:
    """Publish an operator command; unless --no-wait, wait for its acknowledgement and report it."""
    if args.no_wait:
        await _publish(args, OPERATOR_COMMANDS, [(command, command.command_id)])
        print(f"published {what}; the planner acknowledges it on the progress topic")
        return ExitCode.OK
    answer = await _published_and_answered(args, command)
    return _report(answer, what=what, command_id=command.command_id, timeout_s=args.timeout)


async def _published_and_answered(args: argparse.Namespace, command: OperatorCommand | SequenceChange) -> Answer | None:
    _encoded(args, OPERATOR_COMMANDS, command, command.command_id)  # one too large is refused before anything
    bus = _bus(args)
    listener = AckListener(bus, topic_prefix=args.topic_prefix)
    try:
        with _kafka_errors(args, topic=args.topic_prefix + PROGRESS.name):
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                await listener.start()  # before publishing: an answer in milliseconds is not missed
        await _publish(args, OPERATOR_COMMANDS, [(command, command.command_id)], bus=bus)
        with _kafka_errors(args, topic=args.topic_prefix + PROGRESS.name):
            return await listener.answer(command.command_id, timeout_s=args.timeout)
    finally:
        await ctrl_c.closed(bus.close())


def _report(answer: Answer | None, *, what: str, command_id: str, timeout_s: float) -> int:
    if answer is None:
        raise NoAnswerError(
            f"{what} was published, but the planner did not answer within {timeout_s:g} s: check that it runs "
            f"(`rollout status` shows when it last decided), then look for the answer with "
            f"`rollout watch --plain --from-beginning | grep {command_id}`"
        )
    if not answer.accepted:
        print(f"rejected: {what}: {answer.reason}", file=sys.stderr)
        return ExitCode.REJECTED
    print(f"accepted: {what}: {answer.reason}")
    return ExitCode.OK


async def _apply(args: argparse.Namespace) -> int:
    try:
        with spinner(f"reading {args.file}"):
            scenario = load_scenario(args.file)
            clusters = scenario.fleet()
    except ScenarioError as exc:
        raise BadInputError(str(exc)) from exc
    upserts: list[tuple[BaseModel, str]] = [
        (InventoryChange(action="upsert", cluster_group=g), f"inventory-group-{g.name}-{uuid.uuid4().hex[:8]}")
        for g in scenario.cluster_groups
    ]
    upserts += [
        (InventoryChange(action="upsert", cluster=c), f"inventory-{c.name}-{uuid.uuid4().hex[:8]}") for c in clusters
    ]
    with ProgressCount(len(upserts), "publishing clusters to the inventory") as progress:
        await _publish(args, INVENTORY, upserts, create_topics=True, progress=progress)
    groups = len(scenario.cluster_groups)
    published = f"{len(clusters)} cluster(s) published to the inventory" + (
        f" with {groups} cluster group(s)" if groups else ""
    )
    sequence = scenario.sequence
    stored = sequence.model_dump_json(by_alias=True).encode()
    if await _status_if_any(args) is None:
        # No planner has decided anything here yet: it reads the stored sequence when it starts.
        await _with_store(args, lambda store: store.put(SEQUENCE_KEY, stored))
        print(f"applied {args.file}: {published}; sequence {sequence.name!r} ({len(sequence.stages)} stage(s)) stored")
        return ExitCode.OK
    # A running planner never reads the stored sequence again: the change goes to it as an event (SEQ-7).
    change = _validated(SequenceChange, command_id=f"seq-{uuid.uuid4().hex[:12]}", sequence=sequence, issued_by=_user())
    what = f"sequence {sequence.name!r} from {args.file} ({published})"
    if args.no_wait:
        await _publish(args, OPERATOR_COMMANDS, [(change, change.command_id)])
        print(f"published {what} as change {change.command_id}; the planner answers on the progress topic")
        return ExitCode.OK
    answer = await _published_and_answered(args, change)
    if answer is not None and answer.accepted:
        # Kept for a planner that starts without a snapshot; only a definition the planner took.
        await _with_store(args, lambda store: store.put(SEQUENCE_KEY, stored))
    code = _report(
        answer, what=f"{what}, change {change.command_id}", command_id=change.command_id, timeout_s=args.timeout
    )
    return code


async def _publish(
    args: argparse.Namespace,
    topic: TopicDef,
    items: Sequence[tuple[BaseModel, str]],
    *,
    create_topics: bool = False,
    progress: ProgressCount | None = None,
    bus: KafkaBus | None = None,
) -> None:
    """Publish `items` on `topic`; closes the bus afterwards unless it was given."""
    encoded = [_encoded(args, topic, model, event_id) for model, event_id in items]
    own = bus is None
    client = _bus(args) if bus is None else bus
    name = args.topic_prefix + topic.name

    async def send(key: bytes, value: bytes, headers: dict[str, bytes]) -> None:
        await client.publish(name, key=key, value=value, headers=headers)

    try:
        with _kafka_errors(args, topic=name, hint="run `rollout apply` or start the planner first"):
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                if create_topics:
                    await client.ensure_topics([t.spec(args.topic_prefix) for t in ALL])
                if encoded:
                    await send(*encoded[0])  # connects, and fails fast on a wrong address or topic
            # The rest in chunks sent together: one round trip per chunk instead of per message, and a
            # deadline per chunk so a large fleet is not cut off by the connect timeout.
            for start in range(1, len(encoded), _PUBLISH_CHUNK):
                chunk = encoded[start : start + _PUBLISH_CHUNK]
                async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                    await asyncio.gather(*(send(*message) for message in chunk))
                if progress is not None:
                    progress.advance(len(chunk) + (1 if start == 1 else 0))
    finally:
        if own:
            await ctrl_c.closed(client.close())


def _encoded(
    args: argparse.Namespace, topic: TopicDef, model: BaseModel, event_id: str
) -> tuple[bytes, bytes, dict[str, bytes]]:
    """(key, value, headers) of one message; one that every consumer would refuse for its size is
    refused here, before anything is published (it would be dead-lettered, never answered)."""
    value, headers = envelope.encode(model, event_id=event_id, source=args.source, at=time.time())
    problem = envelope.size_problem(value, headers)
    if problem is not None:
        shown = event_id if len(event_id) <= 40 else f"{event_id[:40]}..."
        raise BadInputError(f"{type(model).__name__} {shown}: {problem}; nothing was published")
    return topic.key(model).encode(), value, headers


@contextlib.contextmanager
def _kafka_errors(args: argparse.Namespace, *, topic: str, hint: str = "start the planner first") -> Iterator[None]:
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
        raise BadInputError(f"Kafka at {args.bootstrap} refused: {_short(exc)}") from exc


def _kafka_unreachable(args: argparse.Namespace) -> str:
    return (
        f"cannot reach Kafka at {args.bootstrap}: start the broker or point --bootstrap "
        "(or ROLLOUT_KAFKA_BOOTSTRAP) at a running one"
    )


def _validated(model: type[Any], **fields: Any) -> Any:
    try:
        return model(**fields)
    except ValidationError as exc:
        raise BadInputError("; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())) from exc


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    where = ".".join(map(str, loc)) or "value"
    message = message.removeprefix("Value error, ")
    # the domain validators often name the field themselves
    return message if message.startswith(f"{where}:") else f"{where}: {message}"


# -- reading ----------------------------------------------------------------------------------


async def _with_store(args: argparse.Namespace, call: Callable[[RedisStore], Awaitable[Any]]) -> Any:
    store = _store(args)
    redis = masked_url(args.redis)  # a password in the URL stays out of the message
    try:
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            return await call(store)
    except (TransientError, TimeoutError) as exc:
        raise UnreachableError(
            f"cannot reach Redis at {redis}: start Redis or point --redis (or ROLLOUT_REDIS_URL) at the planner's"
        ) from exc
    except RolloutError as exc:
        raise BadInputError(f"Redis at {redis} refused: {_short(exc)}") from exc
    finally:
        await ctrl_c.closed(store.close())


async def _read_status(args: argparse.Namespace) -> dict[str, Any]:
    raw = await _with_store(args, lambda store: store.get(STATUS_KEY))
    if raw is None:
        raise BadInputError(
            f"no status yet under namespace {args.namespace!r} at {masked_url(args.redis)}: start the planner and "
            "`rollout apply` a sequence, or check --redis and --namespace"
        )
    try:
        document: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise BadInputError(
            f"the status under namespace {args.namespace!r} is not JSON: check --redis and --namespace"
        ) from exc
    return document


async def _status_if_any(args: argparse.Namespace) -> dict[str, Any] | None:
    """The status document when Redis answers and holds one; None otherwise (a check that may be skipped)."""
    try:
        return await _read_status(args)
    except CliError:
        return None


def _check_stage(stage: str, document: Mapping[str, Any]) -> None:
    names = [s["name"] for s in document.get("stages", [])]
    if names and stage not in names:
        raise BadInputError(f"unknown stage {stage!r}: sequence {document.get('sequence')!r} has {', '.join(names)}")


async def _status(args: argparse.Namespace) -> int:
    document = await _read_status(args)
    if args.stage is not None:
        _check_stage(args.stage, document)
        document = {**document, "stages": [s for s in document["stages"] if s["name"] == args.stage]}
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    # Piped or captured output gets wide lines instead of rich's 80-column wrapping, so it greps.
    console = Console(width=None if sys.stdout.isatty() else _PIPED_WIDTH)
    console.print(status_view(document, clock=float(document["now"]), title=_status_title(document, args)))
    return 0


def _status_title(document: Mapping[str, Any], args: argparse.Namespace) -> str:
    where = f"sequence {document.get('sequence', '?')} (channel {document.get('channel', '?')})"
    return f"rollout status · {where} · {document.get('clusters', '?')} clusters · batch {document.get('batch', '?')}"


async def _watch(args: argparse.Namespace) -> int:
    plain = args.plain or not sys.stdout.isatty()
    model: ProgressModel | None = None
    if not plain:
        # The stored status is the best start; without it the screen fills in as events arrive.
        seed = await _status_if_any(args)
        model = ProgressModel(seed, now=time.time())
    bus = _bus(args)
    topic = args.topic_prefix + PROGRESS.name
    # A group of its own: every watcher sees every event, and none moves another's position. Under
    # the topic prefix, as the operator's ACL (prefix `rollout-watch-`, docs/security.md) expects.
    group = f"{args.topic_prefix}rollout-watch-{uuid.uuid4().hex[:8]}"
    consumer = bus.consumer([topic], group=group, from_beginning=args.from_beginning)
    try:
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            first = await consumer.poll(max_records=100, timeout_s=0.1)  # joins; fails fast on a bad address
        if model is None:
            await _watch_plain(consumer, first, count=args.count)
        else:
            await _watch_live(consumer, first, model, count=args.count, title=f"rollout watch · {topic}")
    except UnknownTopicError as exc:
        raise BadInputError(
            f"topic {topic!r} does not exist on {args.bootstrap}: start the planner first, or check --topic-prefix"
        ) from exc
    except (TransientError, TimeoutError) as exc:
        raise UnreachableError(_kafka_unreachable(args)) from exc
    except RolloutError as exc:  # a refused login or a missing ACL: one line, not a traceback
        raise BadInputError(f"Kafka at {args.bootstrap} refused: {_short(exc)}") from exc
    finally:
        await ctrl_c.closed(bus.close())
    return 0


async def _watch_plain(consumer: Consumer, first: list[Record], *, count: int | None) -> None:
    seen, records = 0, first
    while True:
        for record in records:
            print(_progress_line(record.value, record.headers), flush=True)
            seen += 1
            if count is not None and seen >= count:
                return
        records = await consumer.poll(max_records=100, timeout_s=1.0)


async def _watch_live(
    consumer: Consumer, first: list[Record], model: ProgressModel, *, count: int | None, title: str
) -> None:
    recent: deque[str] = deque(maxlen=_RECENT_EVENTS)
    console = Console()

    def screen() -> Any:
        footer = "Ctrl-C stops; batches are estimates until the next `rollout status`"
        clock = float(model.doc["now"])
        return status_view(model.doc, clock=clock, title=title, recent=list(recent), footer=footer)

    seen, records = 0, first
    with Live(screen(), console=console, auto_refresh=False) as live:
        while True:
            for record in records:
                recent.append(_apply_event(model, record))
                seen += 1
                if count is not None and seen >= count:
                    live.update(screen(), refresh=True)
                    return
            if records:
                live.update(screen(), refresh=True)
            records = await consumer.poll(max_records=100, timeout_s=1.0)


def _apply_event(model: ProgressModel, record: Record) -> str:
    line = _progress_line(record.value, record.headers)
    try:
        meta, event = envelope.decode(record.value, record.headers, PROGRESS.models)
    except InvalidInputError:
        return line
    try:
        model.apply(event.model_dump(mode="json", by_alias=True), at=_epoch(meta.time))
    except Exception as exc:  # an event the screen cannot place must not end the watch (BUS-4)
        return f"{line} (not shown on the screen: {type(exc).__name__})"
    return line


def _epoch(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _progress_line(value: bytes, headers: Any) -> str:
    try:
        meta, model = envelope.decode(value, headers, PROGRESS.models)
    except InvalidInputError as exc:
        return f"(unreadable progress event: {exc})"
    body = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    kind = body.pop("kind")
    where = "/".join(str(body.pop(k)) for k in ("rolloutId", "stage", "track") if k in body)
    rest = " ".join(f"{k}={_compact(v)}" for k, v in body.items())
    return f"{meta.time[11:19] or '--:--:--'} {kind:<18} {where} {rest}".rstrip()


# -- schemas ----------------------------------------------------------------------------------


async def _export_schemas(args: argparse.Namespace) -> int:
    count = write_schemas(args.dir)
    print(f"wrote {count} schema(s) and index.json to {args.dir}")
    return ExitCode.OK


async def _write_asyncapi(args: argparse.Namespace) -> int:
    write_asyncapi(args.file)
    print(f"wrote the AsyncAPI {ASYNCAPI_VERSION} document of {len(ALL)} topics to {args.file}")
    return ExitCode.OK


# -- formatting -------------------------------------------------------------------------------


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _pairs(targets: dict[str, str]) -> str:
    return ", ".join(f"{m} -> {v}" for m, v in targets.items())


def _when(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _compact(value: Any) -> str:
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


__all__ = ["register"]
