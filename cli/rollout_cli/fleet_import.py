"""`rollout import fleet FILE`: a Fleet `fleet.yaml`, GitRepo or Bundle's rolloutStrategy as one of our stages.

The rolloutStrategy block is taken as it is (the stage format accepts Fleet's fields unchanged);
what is printed is a stage to paste into a sequence, with the block validated the way the planner
reads it. A GitRepo's single target (clusterSelector or clusterGroup) becomes the stage's selector.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rollout_cli import help_text
from rollout_cli.exit_codes import BadInputError, ExitCode
from rollout_common.sequence import RolloutStrategy

# Fleet resources whose spec may carry a rolloutStrategy (a GitRepo's comes from its fleet.yaml files).
_WITH_SPEC = ("GitRepo", "Bundle", "HelmOp")
_SELECTING = ("clusterSelector", "clusterGroup")


@dataclass
class Imported:
    name: str
    strategy: dict[str, Any] | None
    selector: dict[str, Any] = field(default_factory=lambda: {"clusterSelector": {}})
    notes: list[str] = field(default_factory=list)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sources = help_text.group(
        sub,
        "import",
        dest="source_format",
        metavar="FORMAT",
        summary="turn another tool's rollout definition into ours (Fleet's rolloutStrategy)",
        description="Reads a definition written for another tool and prints the equivalent in our format.",
        examples=["rollout import fleet fleet.yaml", "rollout import fleet gitrepo.yaml"],
    )
    fleet = help_text.command(
        sources,
        "fleet",
        summary="a fleet.yaml, GitRepo or Bundle: its rolloutStrategy as a stage",
        description="Reads Rancher Fleet's fleet.yaml (rolloutStrategy at the top), or a GitRepo, Bundle or "
        "HelmOp manifest (spec.rolloutStrategy, spec.targets), and prints a stage with that rolloutStrategy "
        "unchanged. Partitions that select by clusterGroup or clusterGroupSelector need the groups as "
        "clusterGroups in the fleet file (docs/rollout-strategy.md).",
        examples=["rollout import fleet fleet.yaml > stage.yaml", "rollout import fleet gitrepo.yaml"],
    )
    fleet.add_argument("file", type=Path, help="the Fleet file, e.g. fleet.yaml or gitrepo.yaml")
    fleet.add_argument("--stage", default=None, help="name of the stage printed, e.g. prod (default: from the file)")
    fleet.set_defaults(handler=run_fleet)


def run_fleet(args: argparse.Namespace) -> int:
    try:
        imported = read_fleet(args.file)
        if imported.strategy is not None:
            RolloutStrategy.model_validate(imported.strategy)
    except BadInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"error: {args.file}: rolloutStrategy: {problems}", file=sys.stderr)
        return ExitCode.REJECTED
    for note in imported.notes:
        print(f"note: {note}", file=sys.stderr)
    stage: dict[str, Any] = {"name": args.stage or imported.name, **imported.selector}
    if imported.strategy is not None:
        stage["rolloutStrategy"] = imported.strategy
    print(f"# from {args.file}: paste under sequence.stages")
    print(yaml.safe_dump([stage], sort_keys=False).rstrip())
    return ExitCode.OK


def read_fleet(path: Path) -> Imported:
    try:
        documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise BadInputError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from exc
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        if document.get("kind") in _WITH_SPEC and isinstance(document.get("spec"), Mapping):
            return _from_resource(document)
        if "rolloutStrategy" in document:
            return Imported(name=str(document.get("name") or path.stem), strategy=_block(document["rolloutStrategy"]))
    raise BadInputError(
        f"{path}: no rolloutStrategy, and no GitRepo, Bundle or HelmOp: expected a fleet.yaml with a "
        "top-level rolloutStrategy, or a Fleet resource"
    )


def _from_resource(document: Mapping[str, Any]) -> Imported:
    spec = document["spec"]
    metadata = document.get("metadata") or {}
    imported = Imported(name=str(metadata.get("name") or document["kind"].lower()), strategy=None)
    if "rolloutStrategy" in spec:
        imported.strategy = _block(spec["rolloutStrategy"])
    else:
        imported.notes.append(
            f"{document['kind']} {imported.name} has no rolloutStrategy: Fleet then uses the defaults "
            "(maxUnavailable 100%, autoPartitionSize 25%), as the stage printed does"
        )
    targets = spec.get("targets") or []
    if len(targets) == 1 and isinstance(targets[0], Mapping):
        chosen = {k: v for k, v in targets[0].items() if k in _SELECTING}
        if len(chosen) == 1:
            imported.selector = dict(chosen)
        elif chosen or targets[0].get("clusterGroupSelector") or targets[0].get("clusterName"):
            imported.notes.append("the GitRepo's target combines criteria a stage cannot: choose the stage's clusters")
    elif targets:
        imported.notes.append(f"the GitRepo has {len(targets)} targets: a stage selects one set; choose its clusters")
    return imported


def _block(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadInputError(f"rolloutStrategy is a {type(value).__name__}, expected a mapping of Fleet's fields")
    return dict(value)


__all__ = ["Imported", "read_fleet", "register", "run_fleet"]
