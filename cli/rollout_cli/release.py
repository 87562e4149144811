"""`rollout release` and `rollout start`: publish a release target or an on-demand rollout (START-1, START-2)."""

from __future__ import annotations

import argparse
import uuid

from rollout_cli import help_text
from rollout_cli.async_command import async_command
from rollout_cli.exit_codes import BadInputError
from rollout_cli.options import common_options
from rollout_cli.publishing import publish, validated
from rollout_common.events import ReleaseTarget, StartRollout
from rollout_common.topics.catalog import RELEASE_TARGETS


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = common_options()
    _register_release(sub, common)
    _register_start(sub, common)


def _register_release(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
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
    release.set_defaults(handler=async_command(_release))


def _register_start(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
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
    start.set_defaults(handler=async_command(_start))


async def _release(args: argparse.Namespace) -> int:
    targets: dict[str, str] = {}
    for item in args.target:
        minor, sep, version = item.partition("=")
        if not sep or not minor or not version:
            raise BadInputError(f"--target {item!r}: expected MINOR=VERSION, e.g. 1.30=1.31.13-gke.1023000")
        targets[minor.strip()] = version.strip()
    event_id = args.id or f"release-{uuid.uuid4().hex[:12]}"
    model = validated(ReleaseTarget, event_id=event_id, channel=args.channel, targets=targets)
    await publish(args, RELEASE_TARGETS, [(model, event_id)])
    print(f"published release target {event_id} ({args.channel}: {_pairs(targets)})")
    return 0


async def _start(args: argparse.Namespace) -> int:
    tracks = tuple(t.strip() for t in args.tracks.split(",") if t.strip())
    event_id = args.id or f"start-{uuid.uuid4().hex[:12]}"
    model = validated(StartRollout, event_id=event_id, version=args.version, tracks=tracks)
    await publish(args, RELEASE_TARGETS, [(model, event_id)])
    print(f"published on-demand rollout {event_id} of {args.version} ({', '.join(tracks)})")
    return 0


def _pairs(targets: dict[str, str]) -> str:
    return ", ".join(f"{m} -> {v}" for m, v in targets.items())


__all__ = ["register"]
