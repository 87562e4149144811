"""Commands that talk to a running system: publish releases and operator commands, read status.

Every message goes through the same envelope and topic catalog as the services use. Mistakes a
person can make (a bad version, Kafka or Redis unreachable, a missing file) end in one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import sys
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.live import Live

from rollout_adapters import connections
from rollout_adapters.kafka_bus import KafkaBus
from rollout_adapters.redis_store import RedisStore
from rollout_cli.dashboard import ProgressCount, ProgressModel, spinner, status_view
from rollout_common import envelope
from rollout_common.connection_settings import RedisServiceSettings, load, masked_url
from rollout_common.errors import InvalidInputError, RolloutError, TransientError, UnknownTopicError
from rollout_common.events import InventoryChange, OperatorCommand, ReleaseTarget, StartRollout
from rollout_common.ports import Consumer, Record
from rollout_common.topics import ALL
from rollout_common.topics.catalog import INVENTORY, OPERATOR_COMMANDS, PROGRESS, RELEASE_TARGETS, TopicDef
from rollout_planner.service.checkpoint import SEQUENCE_KEY, STATUS_KEY
from rollout_planner.simulation.scenario import ScenarioError, load_scenario

# Long enough for a broker that is up but slow; short enough that a wrong address fails fast.
_CONNECT_TIMEOUT_S = 20.0
_PIPED_WIDTH = 160
_PUBLISH_CHUNK = 500
_RECENT_EVENTS = 6


class UserError(Exception):
    """Something the person running the command can fix; printed as one line."""


# -- registration ---------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = _common_options()
    release = sub.add_parser("release", parents=[common], help="publish a release target (START-1)")
    release.add_argument("--channel", required=True)
    release.add_argument(
        "--target",
        action="append",
        required=True,
        metavar="MINOR=VERSION",
        help="e.g. 1.30=1.31.13-gke.1023000; repeat for several minors",
    )
    release.add_argument("--id", help="event id; the same id twice starts one rollout (default: a new id)")
    release.set_defaults(handler=_handler(_release))

    start = sub.add_parser("start", parents=[common], help="start an on-demand rollout of one version (START-2)")
    start.add_argument("version")
    start.add_argument("--tracks", default="controlPlane,nodes", help="controlPlane, nodes or both")
    start.add_argument("--id", help="event id (default: a new id)")
    start.set_defaults(handler=_handler(_start))

    for action in ("pause", "resume", "cancel"):
        command = sub.add_parser(action, parents=[common], help=f"{action} a rollout, or every active one (OPS-1)")
        command.add_argument("--rollout", help="rollout id (default: every active rollout)")
        command.set_defaults(handler=_handler(_operator_action), action=action)

    soak = sub.add_parser("soak", parents=[common], help="set or clear a stage's soak for one version (OPS-2)")
    soak.add_argument("--stage", required=True)
    soak.add_argument("--version", required=True)
    soak_choice = soak.add_mutually_exclusive_group(required=True)
    soak_choice.add_argument("--soak", help="duration such as 0d, 12h, 3d (0d to 30d)")
    soak_choice.add_argument("--clear", action="store_true", help="remove the override")
    soak.set_defaults(handler=_handler(_soak))

    status = sub.add_parser(
        "status", parents=[common], help="one screen: rollouts, stages, partitions, why they wait, next wake-up"
    )
    status.add_argument("--json", action="store_true", help="print the raw status document")
    status.add_argument("--stage", help="show this stage only")
    status.set_defaults(handler=_handler(_status))

    watch = sub.add_parser(
        "watch",
        parents=[common],
        help="live status screen moved on by progress events (one line per event with --plain)",
    )
    watch.add_argument("--from-beginning", action="store_true", help="replay the topic's history first")
    watch.add_argument("--count", type=_positive_int, help="exit after this many events")
    watch.add_argument(
        "--plain", action="store_true", help="one line per event (the default when stdout is not a terminal)"
    )
    watch.set_defaults(handler=_handler(_watch, interrupted=0))

    apply = sub.add_parser(
        "apply",
        parents=[common],
        help="publish a scenario/fleet file's clusters to the inventory and store its sequence",
    )
    apply.add_argument("file", type=Path)
    apply.set_defaults(handler=_handler(_apply))

    schemas = sub.add_parser("schemas", help="JSON Schemas of every event (BUS-2)")
    schemas_sub = schemas.add_subparsers(dest="schemas_command", required=True, metavar="ACTION")
    export = schemas_sub.add_parser("export", help="write one JSON Schema per event type, plus index.json")
    export.add_argument("dir", type=Path)
    export.set_defaults(handler=_handler(_export_schemas))


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    env = os.environ.get
    common.add_argument(
        "--bootstrap",
        default=env("ROLLOUT_KAFKA_BOOTSTRAP", "localhost:9092"),
        help="Kafka bootstrap servers (env ROLLOUT_KAFKA_BOOTSTRAP)",
    )
    common.add_argument(
        "--redis",
        default=env("ROLLOUT_REDIS_URL", "redis://localhost:6379/0"),
        help="Redis URL (env ROLLOUT_REDIS_URL)",
    )
    common.add_argument(
        "--topic-prefix",
        default=env("ROLLOUT_TOPIC_PREFIX", ""),
        help="put before every topic name (env ROLLOUT_TOPIC_PREFIX)",
    )
    common.add_argument(
        "--namespace",
        default=env("ROLLOUT_REDIS_NAMESPACE", "rollout"),
        help="the planner's Redis key namespace (env ROLLOUT_REDIS_NAMESPACE)",
    )
    common.add_argument(
        "--source", default=env("ROLLOUT_SOURCE", "rollout-cli"), help="ce_source of what this command publishes"
    )
    return common


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {text!r}")
    return value


def _handler(
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], *, interrupted: int = 130
) -> Callable[[argparse.Namespace], int]:
    """Run an async command; turn the errors a person can cause into one line and exit code 2.

    Ctrl-C exits with `interrupted`: 130 by convention, 0 for `watch`, where it is how one stops.
    """

    def handle(args: argparse.Namespace) -> int:
        # aiokafka logs each failed connection attempt; the one line below says it better.
        logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
        try:
            return asyncio.run(run(args))
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return interrupted

    return handle


# -- clients ----------------------------------------------------------------------------------


def _connection_settings(args: argparse.Namespace) -> RedisServiceSettings:
    """The services' shared connection settings (`ROLLOUT_KAFKA_SECURITY__*`, `ROLLOUT_REDIS_USERNAME`,
    `ROLLOUT_REDIS_PASSWORD`, ...) from the environment, with this command's options on top."""
    try:
        settings = load(RedisServiceSettings, what="connection settings")
    except InvalidInputError as exc:
        raise UserError(str(exc)) from exc
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
            raise UserError(f"--target {item!r}: expected MINOR=VERSION, e.g. 1.30=1.31.13-gke.1023000")
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
    # OPS-5: without --rollout the command says it is for every active rollout
    command = _command(action=args.action, rollout_id=args.rollout, all_rollouts=args.rollout is None)
    await _publish(args, OPERATOR_COMMANDS, [(command, command.command_id)])
    print(
        f"published {args.action} {command.command_id} for {args.rollout or 'every active rollout'}; "
        "the planner acknowledges it on the progress topic"
    )
    return 0


async def _soak(args: argparse.Namespace) -> int:
    document = await _status_if_any(args)
    if document is not None:
        _check_stage(args.stage, document)
    command = _command(
        action="soak_override", stage=args.stage, version=args.version, soak=None if args.clear else args.soak
    )
    await _publish(args, OPERATOR_COMMANDS, [(command, command.command_id)])
    what = "cleared" if args.clear else f"set to {args.soak}"
    print(f"published soak override {command.command_id}: {args.stage} / {args.version} {what}")
    return 0


def _command(**fields: Any) -> OperatorCommand:
    user = os.environ.get("USER") or "unknown"
    command: OperatorCommand = _validated(
        OperatorCommand, command_id=f"cmd-{uuid.uuid4().hex[:12]}", issued_by=user, **fields
    )
    return command


async def _apply(args: argparse.Namespace) -> int:
    try:
        with spinner(f"reading {args.file}"):
            scenario = load_scenario(args.file)
            clusters = scenario.fleet()
    except ScenarioError as exc:
        raise UserError(str(exc)) from exc
    upserts = [
        (InventoryChange(action="upsert", cluster=c), f"inventory-{c.name}-{uuid.uuid4().hex[:8]}") for c in clusters
    ]
    sequence = scenario.sequence.model_dump_json(by_alias=True).encode()
    await _with_store(args, lambda store: store.put(SEQUENCE_KEY, sequence))
    with ProgressCount(len(upserts), "publishing clusters to the inventory") as progress:
        await _publish(args, INVENTORY, upserts, create_topics=True, progress=progress)
    print(
        f"applied {args.file}: sequence {scenario.sequence.name!r} with {len(scenario.sequence.stages)} "
        f"stage(s) stored; {len(clusters)} cluster(s) published to the inventory"
    )
    return 0


async def _publish(
    args: argparse.Namespace,
    topic: TopicDef,
    items: Sequence[tuple[BaseModel, str]],
    *,
    create_topics: bool = False,
    progress: ProgressCount | None = None,
) -> None:
    bus = _bus(args)
    name = args.topic_prefix + topic.name

    async def send(model: BaseModel, event_id: str) -> None:
        value, headers = envelope.encode(model, event_id=event_id, source=args.source, at=time.time())
        await bus.publish(name, key=topic.key(model).encode(), value=value, headers=headers)

    try:
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            if create_topics:
                await bus.ensure_topics([t.spec(args.topic_prefix) for t in ALL])
            if items:
                await send(*items[0])  # connects, and fails fast on a wrong address or topic
        # The rest in chunks sent together: one round trip per chunk instead of per message, and a
        # deadline per chunk so a large fleet is not cut off by the connect timeout.
        for start in range(1, len(items), _PUBLISH_CHUNK):
            chunk = items[start : start + _PUBLISH_CHUNK]
            async with asyncio.timeout(_CONNECT_TIMEOUT_S):
                await asyncio.gather(*(send(model, event_id) for model, event_id in chunk))
            if progress is not None:
                progress.advance(len(chunk) + (1 if start == 1 else 0))
    except UnknownTopicError as exc:
        raise UserError(
            f"topic {name!r} does not exist on {args.bootstrap}: run `rollout apply` or start the "
            f"planner first, or check --topic-prefix"
        ) from exc
    except (TransientError, TimeoutError) as exc:
        raise UserError(_kafka_unreachable(args)) from exc
    except RolloutError as exc:
        raise UserError(f"Kafka at {args.bootstrap} refused: {_short(exc)}") from exc
    finally:
        await bus.close()


def _kafka_unreachable(args: argparse.Namespace) -> str:
    return (
        f"cannot reach Kafka at {args.bootstrap}: start the broker or point --bootstrap "
        "(or ROLLOUT_KAFKA_BOOTSTRAP) at a running one"
    )


def _validated(model: type[Any], **fields: Any) -> Any:
    try:
        return model(**fields)
    except ValidationError as exc:
        raise UserError("; ".join(_problem(e["loc"], e["msg"]) for e in exc.errors())) from exc


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
        raise UserError(
            f"cannot reach Redis at {redis}: start Redis or point --redis (or ROLLOUT_REDIS_URL) at the planner's"
        ) from exc
    except RolloutError as exc:
        raise UserError(f"Redis at {redis} refused: {_short(exc)}") from exc
    finally:
        await store.close()


async def _read_status(args: argparse.Namespace) -> dict[str, Any]:
    raw = await _with_store(args, lambda store: store.get(STATUS_KEY))
    if raw is None:
        raise UserError(
            f"no status yet under namespace {args.namespace!r} at {masked_url(args.redis)}: start the planner and "
            "`rollout apply` a sequence, or check --redis and --namespace"
        )
    try:
        document: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise UserError(
            f"the status under namespace {args.namespace!r} is not JSON: check --redis and --namespace"
        ) from exc
    return document


async def _status_if_any(args: argparse.Namespace) -> dict[str, Any] | None:
    """The status document when Redis answers and holds one; None otherwise (a check that may be skipped)."""
    try:
        return await _read_status(args)
    except UserError:
        return None


def _check_stage(stage: str, document: Mapping[str, Any]) -> None:
    names = [s["name"] for s in document.get("stages", [])]
    if names and stage not in names:
        raise UserError(f"unknown stage {stage!r}: sequence {document.get('sequence')!r} has {', '.join(names)}")


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
        raise UserError(
            f"topic {topic!r} does not exist on {args.bootstrap}: start the planner first, or check --topic-prefix"
        ) from exc
    except (TransientError, TimeoutError) as exc:
        raise UserError(_kafka_unreachable(args)) from exc
    except RolloutError as exc:  # a refused login or a missing ACL: one line, not a traceback
        raise UserError(f"Kafka at {args.bootstrap} refused: {_short(exc)}") from exc
    finally:
        await bus.close()
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
    at = _epoch(meta.time)
    model.apply(event.model_dump(mode="json", by_alias=True), at=at)
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
    try:
        args.dir.mkdir(parents=True, exist_ok=True)
        index: dict[str, Any] = {}
        written: set[str] = set()
        for topic in ALL:
            files = []
            for model in topic.models:
                kind = model.model_fields["kind"].default
                filename = f"{envelope.TYPE_PREFIX}{kind}.v1.json"
                files.append(filename)
                if filename not in written:
                    schema = model.model_json_schema(by_alias=True)
                    schema["$id"] = filename
                    (args.dir / filename).write_text(json.dumps(schema, indent=2) + "\n")
                    written.add(filename)
            index[topic.name] = {
                "partitions": topic.partitions,
                "compacted": topic.compacted,
                "schemas": files,
                "doc": topic.doc,
            }
        (args.dir / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    except OSError as exc:
        raise UserError(f"{args.dir}: cannot write: {exc.strerror}") from exc
    print(f"wrote {len(written)} schema(s) and index.json to {args.dir}")
    return 0


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


__all__ = ["UserError", "register"]
