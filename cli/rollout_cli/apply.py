"""`rollout apply`: a fleet file's clusters to the inventory, its sequence to the planner (SEQ-7)."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

from pydantic import BaseModel

from rollout_cli import help_text
from rollout_cli.acks import published_and_answered, report
from rollout_cli.async_command import async_command
from rollout_cli.clients import with_store
from rollout_cli.exit_codes import BadInputError, ExitCode
from rollout_cli.options import ack_options, common_options
from rollout_cli.progress_bars import ProgressCount, spinner
from rollout_cli.publishing import publish, user, validated
from rollout_cli.status import status_if_any
from rollout_common.events import InventoryChange, SequenceChange
from rollout_common.fleet import Cluster
from rollout_common.topics.catalog import INVENTORY, OPERATOR_COMMANDS
from rollout_planner.service.checkpoint import SEQUENCE_KEY
from rollout_planner.simulation.scenario import Scenario, ScenarioError, load_scenario


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = common_options()
    acked = ack_options()
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
    apply.set_defaults(handler=async_command(_apply))


async def _apply(args: argparse.Namespace) -> int:
    scenario, clusters = _read(args.file)
    published = await _publish_fleet(args, scenario, clusters)
    sequence = scenario.sequence
    stored = sequence.model_dump_json(by_alias=True).encode()
    if await status_if_any(args) is None:
        # No planner has decided anything here yet: it reads the stored sequence when it starts.
        await with_store(args, lambda store: store.put(SEQUENCE_KEY, stored))
        print(f"applied {args.file}: {published}; sequence {sequence.name!r} ({len(sequence.stages)} stage(s)) stored")
        return ExitCode.OK
    # A running planner never reads the stored sequence again: the change goes to it as an event (SEQ-7).
    change = validated(SequenceChange, command_id=f"seq-{uuid.uuid4().hex[:12]}", sequence=sequence, issued_by=user())
    what = f"sequence {sequence.name!r} from {args.file} ({published})"
    if args.no_wait:
        await publish(args, OPERATOR_COMMANDS, [(change, change.command_id)])
        print(f"published {what} as change {change.command_id}; the planner answers on the progress topic")
        return ExitCode.OK
    answer = await published_and_answered(args, change)
    if answer is not None and answer.accepted:
        # Kept for a planner that starts without a snapshot; only a definition the planner took.
        await with_store(args, lambda store: store.put(SEQUENCE_KEY, stored))
    return report(
        answer, what=f"{what}, change {change.command_id}", command_id=change.command_id, timeout_s=args.timeout
    )


def _read(path: Path) -> tuple[Scenario, list[Cluster]]:
    try:
        with spinner(f"reading {path}"):
            scenario = load_scenario(path)
            return scenario, scenario.fleet()
    except ScenarioError as exc:
        raise BadInputError(str(exc)) from exc


async def _publish_fleet(args: argparse.Namespace, scenario: Scenario, clusters: list[Cluster]) -> str:
    """Every cluster group, then every cluster, upserted in the inventory; says what was published."""
    upserts: list[tuple[BaseModel, str]] = [
        (InventoryChange(action="upsert", cluster_group=g), f"inventory-group-{g.name}-{uuid.uuid4().hex[:8]}")
        for g in scenario.cluster_groups
    ]
    upserts += [
        (InventoryChange(action="upsert", cluster=c), f"inventory-{c.name}-{uuid.uuid4().hex[:8]}") for c in clusters
    ]
    with ProgressCount(len(upserts), "publishing clusters to the inventory") as progress:
        await publish(args, INVENTORY, upserts, create_topics=True, progress=progress)
    groups = len(scenario.cluster_groups)
    return f"{len(clusters)} cluster(s) published to the inventory" + (
        f" with {groups} cluster group(s)" if groups else ""
    )


__all__ = ["register"]
