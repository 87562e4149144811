"""`rollout config-docs [--check]`: docs/configuration.md, generated from the services' settings models.

The page is derived, never edited: every variable name, type, default and description comes from
the pydantic models the services load at start, so the page cannot drift from them. `--check`
regenerates in memory and exits 1 when the file on disk differs (CI runs it through the tests).
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

from rollout_cli import help_text
from rollout_executor.settings import ExecutorSettings
from rollout_health.settings import CheckRunnerSettings, InventorySettings, MonitorSettings, ReporterSettings
from rollout_planner.service.settings import PlannerSettings

DEFAULT_OUTPUT = Path("docs/configuration.md")


@dataclass(frozen=True, slots=True)
class Service:
    title: str
    command: str
    settings: type[BaseSettings]


SERVICES: tuple[Service, ...] = (
    Service("Planner", "python -m rollout_planner.service [--config FILE]", PlannerSettings),
    Service("Executor", "python -m rollout_executor [--config FILE]", ExecutorSettings),
    Service("Health reporter", "python -m rollout_health reporter [--config FILE]", ReporterSettings),
    Service("Health monitor", "python -m rollout_health monitor [--config FILE]", MonitorSettings),
    Service("Inventory watcher", "python -m rollout_health inventory [--config FILE]", InventorySettings),
    Service("Check runner", "python -m rollout_health checks [--config FILE]", CheckRunnerSettings),
)


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One settable variable: a leaf field, or a nested field reached through the delimiter."""

    name: str
    type: str
    default: str
    description: str


def env_vars(settings: type[BaseSettings]) -> list[EnvVar]:
    """Every environment variable `settings` reads, in field order, nested sections expanded."""
    config = settings.model_config
    prefix = str(config.get("env_prefix") or "")
    delimiter = config.get("env_nested_delimiter") or None
    return list(_walk(settings, prefix.upper(), delimiter))


def env_names(settings: type[BaseSettings]) -> set[str]:
    """The names alone; the deployment tests check every ROLLOUT_* variable against these."""
    return {var.name for var in env_vars(settings)}


def _walk(model: type[BaseModel], prefix: str, delimiter: str | None) -> Iterator[EnvVar]:
    for name, field in model.model_fields.items():
        env = prefix + name.upper()
        nested = _model_class(field.annotation)
        if nested is not None and delimiter:
            # A section is set field by field through the delimiter (or whole, as JSON, under its
            # own name, which pydantic-settings also accepts; the page lists the finer form).
            yield from _walk(nested, env + delimiter, delimiter)
            continue
        yield EnvVar(env, _type_text(field), _default_text(field), _one_line(field.description or ""))


def _model_class(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _type_text(field: FieldInfo) -> str:
    text = _annotation_text(field.annotation)
    bounds = []
    for item in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                bounds.append(f"{sign} {getattr(item, attr)}")
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _annotation_text(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _annotation_text(a) for a in args)
    if origin in (tuple, list, frozenset, set):
        return f"JSON list of {_annotation_text(args[0])}" if args else "JSON list"
    if origin is dict:
        key = args[0]
        keys = "/".join(str(m.value) for m in key) if isinstance(key, type) and issubclass(key, enum.Enum) else None
        return f"JSON object {keys or _annotation_text(key)} -> {_annotation_text(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(str(member.value) for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "JSON object"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(field: FieldInfo) -> str:
    if field.default_factory is not None:
        # A factory that answers differently on each call (an id with a random part) has no
        # default worth printing, and printing one would make the page change on every run.
        first, second = field.default_factory(), field.default_factory()  # type: ignore[call-arg]
        return _value_text(first) if first == second else "generated per process"
    if field.default is PydanticUndefined:
        return "required"
    return _value_text(field.default)


def _value_text(value: Any) -> str:
    return "`" + json.dumps(_plain(value), sort_keys=True) + "`"


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    if isinstance(value, Path):
        return str(value)
    return value


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# The page's opening: how settings are read, whatever the service.
_INTRO = [
    "# Configuration",
    "",
    "<!-- Generated by `rollout config-docs` from the settings models; edit those, then rerun it. -->",
    "",
    "Every service reads its settings from environment variables, and optionally from a YAML file",
    "given with `--config FILE`. A variable wins over the same setting in the file, so one file",
    "can serve several processes that differ in a variable or two. Names are not case-sensitive.",
    "",
    "Nested sections are set field by field with the delimiter in the name",
    "(`ROLLOUT_SIMULATED__TIME_SCALE=0.01`), or whole as JSON under the section's own name. Lists",
    'and maps are JSON (`ROLLOUT_CLUSTERS=\'["c1","c2"]\'`).',
    "",
    "The same name can mean different things to different services (`ROLLOUT_SIMULATED__TIME_SCALE`",
    "scales the executor's upgrades and the reporter's settling time): give each service its own",
    "environment rather than one shared list. The deployment files in `deploy/` do so.",
    "",
]


def render() -> str:
    lines = list(_INTRO)
    for service in SERVICES:
        lines += _service_section(service)
    return "\n".join(lines)


def _service_section(service: Service) -> list[str]:
    config = service.settings.model_config
    delimiter = config.get("env_nested_delimiter")
    lines = [
        f"## {service.title}",
        "",
        f"`{service.command}`, settings model `{service.settings.__module__}.{service.settings.__name__}`.",
        "",
        f"- prefix: `{config.get('env_prefix') or ''}`",
        f"- nested delimiter: `{delimiter}`" if delimiter else "- nested delimiter: none (no nested sections)",
        "",
        "| variable | type | default | description |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{v.name}` | {v.type} | {v.default} | {v.description} |" for v in env_vars(service.settings)]
    lines.append("")
    return lines


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = help_text.command(
        sub,
        "config-docs",
        summary="write docs/configuration.md from the services' settings models",
        description="Renders every service setting (environment variable, default, description) from the "
        "settings models, so the page cannot drift from the code.",
        examples=["rollout config-docs", "rollout config-docs --check"],
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"file to write or check, e.g. /tmp/configuration.md (default {DEFAULT_OUTPUT})",
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the file is stale, e.g. in CI")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    text = render()
    path: Path = args.output
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current != text:
            print(f"{path} is stale: run `rollout config-docs` and commit the result", file=sys.stderr)
            return 1
        print(f"{path} is up to date")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0
