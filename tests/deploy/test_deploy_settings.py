"""Every ROLLOUT_* variable the deployment files set is one the service's settings model reads,
and every value is one it accepts; probes ask paths and ports the services really serve.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deploy_model import (
    K8S_ENTRY_POINTS,
    SETTINGS_BY_COMMAND,
    accepted_env_names,
    compose_env,
    compose_rollout_services,
    container_env,
    kustomize,
    load_settings_from,
    rollout_containers,
    settings_for,
)
from faust.web.base import Web
from mode.utils.imports import symbol_by_name
from pydantic_settings import BaseSettings

from rollout_cli import configdoc
from rollout_executor.settings import ExecutorSettings
from rollout_health.monitor import HealthMonitor
from rollout_health.settings import CheckRunnerSettings, MonitorSettings, ReporterSettings
from rollout_planner.service.settings import PlannerSettings


def _k8s_containers() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    found = []
    for entry in K8S_ENTRY_POINTS:
        build = kustomize(entry)
        for deployment, container in rollout_containers(build):
            label = f"{entry.name}/{deployment['metadata']['name']}/{container['name']}"
            found.append((label, container, container_env(build, container)))
    return found


def _compose_containers() -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    return [(f"compose/{name}", service, compose_env(service)) for name, service in compose_rollout_services()]


CONTAINERS = _k8s_containers() + _compose_containers()


def test_every_service_is_deployed_by_compose_and_by_kubernetes() -> None:
    for source in ("compose/", "k8s/"):
        models = {settings_for(c["command"]) for label, c, _ in CONTAINERS if label.startswith(source)}
        assert models == set(SETTINGS_BY_COMMAND.values()), f"{source} lacks a service"


@pytest.mark.parametrize("module", sorted({key[0] for key in SETTINGS_BY_COMMAND}))
def test_entry_points_exist_and_take_the_sub_commands_used(module: str) -> None:
    assert importlib.util.find_spec(module + ".__main__") is not None
    result = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    for key in SETTINGS_BY_COMMAND:
        if key[0] == module:
            for sub_command in key[1:]:
                assert sub_command in result.stdout


@pytest.mark.parametrize(("label", "container", "env"), CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_variables_exist_in_the_settings_model(label: str, container: dict[str, Any], env: dict[str, str]) -> None:
    model = settings_for(container["command"])
    rollout_vars = {name for name in env if name.startswith("ROLLOUT_")}
    unknown = rollout_vars - accepted_env_names(model)
    # Health models ignore unknown names (extra="ignore"), so a typo would pass silently at run time.
    assert not unknown, f"{label}: {model.__name__} reads no {sorted(unknown)}"
    assert set(env) == rollout_vars, f"{label}: non-ROLLOUT_ variables {sorted(set(env) - rollout_vars)}"


@pytest.mark.parametrize(("label", "container", "env"), CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_values_are_accepted_by_the_settings_model(
    label: str, container: dict[str, Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = settings_for(container["command"])
    settings = load_settings_from(model, env, monkeypatch)
    if isinstance(settings, PlannerSettings) and settings.http_port:
        # The planner listens on loopback by default; in a container nobody could probe it.
        assert settings.http_host == "0.0.0.0", f"{label}: set ROLLOUT_HTTP_HOST=0.0.0.0"
    if isinstance(settings, ExecutorSettings) and settings.metrics_port:
        assert settings.metrics_host == "0.0.0.0", label


def test_the_generated_names_are_the_ones_the_models_accept() -> None:
    """configdoc lists leaf variables; each must be one pydantic-settings maps onto a field."""
    for service in configdoc.SERVICES:
        assert configdoc.env_names(service.settings) <= accepted_env_names(service.settings)


# ---- probes ------------------------------------------------------------------------------------


def _route_strings(module: str) -> set[str]:
    """Path literals in a service's HTTP module: the routes it registers."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/")
    }


def _faust_routes(settings: MonitorSettings) -> set[str]:
    """What the monitor's faust web server serves, asked of the app the monitor builds."""
    web: Web = HealthMonitor(settings).app.web
    return {prefix + route.uri for prefix, bp in web._enabled_blueprints() for route in symbol_by_name(bp).routes}


def served(settings: BaseSettings) -> tuple[int, set[str]]:
    """(port, paths) of the service's HTTP endpoints with these settings; port 0: none."""
    # Every service serves its probes and metrics with the one shared server.
    routes = _route_strings("rollout_adapters.status_server")
    if isinstance(settings, PlannerSettings):
        return settings.http_port, routes
    if isinstance(settings, ExecutorSettings | ReporterSettings | CheckRunnerSettings):
        return settings.metrics_port, routes
    assert isinstance(settings, MonitorSettings)
    if settings.metrics_port:
        return settings.metrics_port, routes
    return settings.web_port, _faust_routes(settings) if settings.web_port else set()


K8S_CONTAINERS = [c for c in CONTAINERS if not c[0].startswith("compose/")]


@pytest.mark.parametrize(("label", "container", "env"), K8S_CONTAINERS, ids=[c[0] for c in K8S_CONTAINERS])
def test_k8s_probes_ask_served_paths_on_the_service_port(
    label: str, container: dict[str, Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings_from(settings_for(container["command"]), env, monkeypatch)
    port, paths = served(settings)
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    probes = {
        kind: container[kind] for kind in ("livenessProbe", "readinessProbe", "startupProbe") if kind in container
    }
    if port == 0:
        assert not probes, f"{label}: probes, but the service serves no HTTP endpoint"
        return
    assert {"livenessProbe", "readinessProbe"} <= set(probes), f"{label}: liveness and readiness wanted"
    assert port in ports.values(), f"{label}: containerPort {port} (from the settings) not declared"
    for kind, probe in probes.items():
        get = probe["httpGet"]
        assert get["path"] in paths, f"{label} {kind}: {get['path']} is not served (only {sorted(paths)})"
        assert ports.get(get["port"], get["port"]) == port, f"{label} {kind}: probes a port the service does not use"
    if paths >= {"/healthz", "/readyz"}:
        assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz", label
        assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz", label


COMPOSE_CONTAINERS = [c for c in CONTAINERS if c[0].startswith("compose/")]


@pytest.mark.parametrize(("label", "service", "env"), COMPOSE_CONTAINERS, ids=[c[0] for c in COMPOSE_CONTAINERS])
def test_compose_healthchecks_ask_served_urls(
    label: str, service: dict[str, Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings_from(settings_for(service["command"]), env, monkeypatch)
    port, paths = served(settings)
    check = " ".join(service.get("healthcheck", {}).get("test", []))
    if port == 0:
        assert not check, f"{label}: a healthcheck, but the service serves no HTTP endpoint"
        return
    assert f"http://127.0.0.1:{port}/" in check, f"{label}: healthcheck not on port {port}"
    path = "/" + check.split(f"http://127.0.0.1:{port}/", 1)[1].split("'", 1)[0]
    assert path in paths, f"{label}: {path} is not served (only {sorted(paths)})"
