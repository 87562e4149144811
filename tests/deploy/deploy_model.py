"""The deployment files as data, read without Docker, kubectl or kustomize.

Helpers for the tests in this folder: which settings model a container's command loads, which
ROLLOUT_* names that model reads, the environment a compose service or a Kubernetes container
ends up with, and a small kustomize that follows `resources` and applies `namespace`/`images`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_settings import BaseSettings

from rollout_executor.settings import ExecutorSettings
from rollout_health.settings import CheckRunnerSettings, MonitorSettings, ReporterSettings
from rollout_planner.service.settings import PlannerSettings

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
COMPOSE_FILE = DEPLOY / "compose" / "compose.yaml"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
K8S = DEPLOY / "k8s"
# Each directory `kubectl apply -k` is meant for.
K8S_ENTRY_POINTS = (K8S, K8S / "hpa")

# `python -m <module> [sub-command]` -> the model that process loads its settings into.
SETTINGS_BY_COMMAND: dict[tuple[str, ...], type[BaseSettings]] = {
    ("rollout_planner.service",): PlannerSettings,
    ("rollout_executor",): ExecutorSettings,
    ("rollout_health", "reporter"): ReporterSettings,
    ("rollout_health", "monitor"): MonitorSettings,
    ("rollout_health", "checks"): CheckRunnerSettings,
}


def settings_for(command: list[str]) -> type[BaseSettings]:
    assert command[:2] == ["python", "-m"], f"services run as `python -m ...`, not {command}"
    key = tuple(command[2:])
    assert key in SETTINGS_BY_COMMAND, f"{command}: not a rollout service entry point"
    return SETTINGS_BY_COMMAND[key]


def accepted_env_names(model: type[BaseSettings]) -> set[str]:
    """Every variable name pydantic-settings maps onto a field of `model`.

    A nested section is accepted whole (JSON under its own name) and field by field through the
    delimiter; without a delimiter only top-level names exist.
    """
    prefix = str(model.model_config.get("env_prefix") or "").upper()
    delimiter = model.model_config.get("env_nested_delimiter")
    names: set[str] = set()

    def visit(cls: type[BaseModel], stem: str) -> None:
        for name, info in cls.model_fields.items():
            full = stem + name.upper()
            names.add(full)
            sub = info.annotation
            if delimiter and isinstance(sub, type) and issubclass(sub, BaseModel):
                visit(sub, full + delimiter)

    visit(model, prefix)
    return names


def load_settings_from(model: type[BaseSettings], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> BaseSettings:
    """Build `model` from exactly `env` (the test process's own ROLLOUT_* variables removed)."""
    for name in list(os.environ):
        if name.upper().startswith("ROLLOUT_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return model()


# ---- compose ---------------------------------------------------------------------------------

_INTERPOLATION = re.compile(r"\$\{(?P<name>\w+)(?::?-(?P<default>[^}]*))?\}")


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def interpolated(value: Any) -> str:
    """A compose value as the container sees it when the shell sets none of the variables."""
    return _INTERPOLATION.sub(lambda m: m.group("default") or "", str(value))


def compose_rollout_services() -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, service) for every compose service that runs a rollout process."""
    for name, service in compose()["services"].items():
        command = service.get("command")
        if isinstance(command, list) and command[:2] == ["python", "-m"]:
            yield name, service


def compose_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment as a mapping keeps the merge keys readable"
    return {str(k): interpolated(v) for k, v in env.items()}


# ---- kustomize -------------------------------------------------------------------------------


@dataclass
class Build:
    """What `kustomize build` would emit, as far as these files use kustomize."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    # image name -> "name:tag" after the `images` transformer.
    images: dict[str, str] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d.get("kind") == kind]

    def named(self, kind: str, name: str) -> dict[str, Any]:
        found = [d for d in self.of_kind(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name!r}, found {len(found)}"
        return found[0]


def kustomize(directory: Path) -> Build:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    build = Build()
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        assert path.exists(), f"{directory}/kustomization.yaml: resource {entry} does not exist"
        if path.is_dir():
            inner = kustomize(path)
            build.docs += inner.docs
            build.images.update(inner.images)
        else:
            build.docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    for image in kustomization.get("images", []):
        build.images[image["name"]] = f"{image.get('newName', image['name'])}:{image['newTag']}"
    namespace = kustomization.get("namespace")
    if namespace:
        for doc in build.docs:
            if doc["kind"] != "Namespace":
                doc["metadata"]["namespace"] = namespace
    return build


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container_env(build: Build, container: dict[str, Any]) -> dict[str, str]:
    """The container's variables: envFrom ConfigMaps and Secrets first, then `env` over them."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(build.named("ConfigMap", source["configMapRef"]["name"]).get("data", {}))
        else:
            secret = build.named("Secret", source["secretRef"]["name"])
            env.update(secret.get("stringData", {}))
    for item in container.get("env", []):
        # A value from the downward API is known only in the pod; any string stands for it.
        env[item["name"]] = item.get("value", "from-the-pod")
    return {k: str(v) for k, v in env.items()}


def rollout_containers(build: Build) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(Deployment, container) for every container that runs a rollout process."""
    for deployment in build.of_kind("Deployment"):
        for container in pod_spec(deployment)["containers"]:
            yield deployment, container
