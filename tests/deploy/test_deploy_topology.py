"""The deployment files agree with the code: topics with the catalog, the autoscaler with the
executors' group and topic, budgets with the pods they guard; images are pinned; the planner
runs alone; executors can be scaled; the image runs as a non-root user.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml
from deploy_model import (
    COMPOSE_FILE,
    DEPLOY,
    DOCKERFILE,
    K8S,
    K8S_ENTRY_POINTS,
    REPO,
    Build,
    compose,
    compose_env,
    container_env,
    kustomize,
    pod_spec,
    settings_for,
)

from rollout_cli.main import main as rollout
from rollout_common.topics import ALL
from rollout_common.topics.catalog import STAGE_ADVANCE
from rollout_executor.settings import ExecutorSettings

BUILDS = {entry.relative_to(REPO).as_posix(): kustomize(entry) for entry in K8S_ENTRY_POINTS}


def _executor_env(build: Build) -> dict[str, str]:
    deployment = build.named("Deployment", "rollout-executor")
    (container,) = pod_spec(deployment)["containers"]
    assert settings_for(container["command"]) is ExecutorSettings
    return container_env(build, container)


# ---- compose -----------------------------------------------------------------------------------


def _created_topics(document: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """topic -> {partitions, configs} from every kafka-topics.sh --create line of kafka-init."""
    init = (document or compose())["services"]["kafka-init"]
    script = "\n".join(init["command"])
    # The script keeps the shared part of the command in a variable, one topic per line.
    assert "/opt/kafka/bin/kafka-topics.sh" in script and "--create" in script
    topics: dict[str, dict[str, Any]] = {}
    for line in script.splitlines():
        words = shlex.split(line)
        if "--topic" not in words or "--partitions" not in words:
            continue
        name = words[words.index("--topic") + 1]
        configs = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--config")
        assert name not in topics, f"{name} created twice"
        topics[name] = {"partitions": int(words[words.index("--partitions") + 1]), "configs": configs}
    return topics


def test_topic_creation_matches_the_catalog() -> None:
    created = _created_topics()
    assert set(created) == {topic.name for topic in ALL}
    for topic in ALL:
        spec = topic.spec()
        made = created[topic.name]
        assert made["partitions"] == spec.partitions, topic.name
        assert (made["configs"].get("cleanup.policy") == "compact") == spec.compacted, topic.name
        retention = made["configs"].get("retention.ms")
        assert (None if retention is None else int(retention)) == spec.retention_ms, topic.name


def test_the_production_topology_creates_the_same_topics() -> None:
    """compose.ha.yaml replaces kafka-init's script: it must create every topic of the catalog too
    (the services do not create topics, and the planner cannot subscribe to a missing one)."""
    overlay = yaml.safe_load((COMPOSE_FILE.parent / "compose.ha.yaml").read_text(encoding="utf-8"))
    created = _created_topics(overlay)
    assert {name: made["partitions"] for name, made in created.items()} == {t.name: t.partitions for t in ALL}


def test_kafka_is_the_apache_image_in_kraft_mode_and_topics_are_not_auto_created() -> None:
    services = compose()["services"]
    kafka = services["kafka"]
    assert kafka["image"] == "apache/kafka:4.1.1"
    assert services["kafka-init"]["image"] == kafka["image"]
    env = kafka["environment"]
    assert set(str(env["KAFKA_PROCESS_ROLES"]).split(",")) == {"broker", "controller"}
    assert "CONTROLLER" in str(env["KAFKA_CONTROLLER_LISTENER_NAMES"])
    assert str(env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]) == "false"


def test_services_wait_for_the_topics_and_leave_creation_to_kafka_init() -> None:
    for name, service in compose()["services"].items():
        if isinstance(service.get("command"), list) and service["command"][:2] == ["python", "-m"]:
            assert service["depends_on"]["kafka-init"]["condition"] == "service_completed_successfully", name
            assert compose_env(service)["ROLLOUT_CREATE_TOPICS"] == "false", name


def test_redis_7_keeps_an_append_only_file() -> None:
    redis = compose()["services"]["redis"]
    assert re.fullmatch(r"redis:7(\.\d+)*(-\w+)?", redis["image"])
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])


def test_executor_can_be_scaled() -> None:
    executor = compose()["services"]["executor"]
    # `--scale executor=N` needs generated names and no fixed host port.
    assert "container_name" not in executor
    assert "ports" not in executor
    grace = float(compose_env(executor)["ROLLOUT_SHUTDOWN_GRACE_S"])
    assert float(executor["stop_grace_period"].rstrip("s")) > grace


# ---- images ------------------------------------------------------------------------------------


def _pinned(image: str) -> bool:
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def test_compose_images_are_pinned() -> None:
    for name, service in compose()["services"].items():
        assert _pinned(service["image"]), f"{name}: {service['image']}"


@pytest.mark.parametrize("entry", sorted(BUILDS))
def test_k8s_images_are_pinned(entry: str) -> None:
    build = BUILDS[entry]
    for deployment in build.of_kind("Deployment"):
        for container in pod_spec(deployment)["containers"]:
            image = build.images.get(container["image"], container["image"])
            assert _pinned(image), f"{deployment['metadata']['name']}: {image}"


def _dockerfile_stages() -> list[str]:
    text = DOCKERFILE.read_text(encoding="utf-8")
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))
    return [re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base) for base in re.findall(r"^FROM (\S+)", text, re.M)]


def test_dockerfile_is_multi_stage_on_a_pinned_python_3_11() -> None:
    stages = _dockerfile_stages()
    assert len(stages) >= 2
    assert all(base == "python:3.11-slim-bookworm" for base in stages)
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^COPY --from=builder ", text, re.M), "the runtime stage copies the built venv"
    assert re.search(r"pip install \.", text), "installs the project (pinned versions from pyproject.toml)"


def test_image_runs_as_the_non_root_user_the_pods_expect() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users, "no USER: the image would run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric uid lets runAsNonRoot verify it"
    for build in BUILDS.values():
        for deployment in build.of_kind("Deployment"):
            security = pod_spec(deployment)["securityContext"]
            assert security["runAsNonRoot"] is True
            assert str(security["runAsUser"]) == uid, deployment["metadata"]["name"]
            for container in pod_spec(deployment)["containers"]:
                assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_build_context_sends_what_the_dockerfile_copies() -> None:
    """The context is the repository root; the Dockerfile's ignore file must let its inputs through."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    ignore = (DEPLOY / "docker" / "Dockerfile.dockerignore").read_text(encoding="utf-8")
    allowed = {line[1:].rstrip("/") for line in ignore.splitlines() if line.startswith("!")}
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        *sources, _dest = line.split()
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"
            assert source.rstrip("/") in allowed, f"COPY {source}: excluded by Dockerfile.dockerignore"


# ---- kubernetes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", sorted(BUILDS))
def test_planner_runs_alone_and_is_replaced_not_rolled(entry: str) -> None:
    planner = BUILDS[entry].named("Deployment", "rollout-planner")
    assert planner["spec"]["replicas"] == 1
    assert planner["spec"]["strategy"]["type"] == "Recreate"


@pytest.mark.parametrize("entry", sorted(BUILDS))
def test_executors_roll_and_get_time_to_finish_their_batch(entry: str) -> None:
    build = BUILDS[entry]
    executor = build.named("Deployment", "rollout-executor")
    assert executor["spec"]["strategy"]["type"] == "RollingUpdate"
    grace = float(_executor_env(build)["ROLLOUT_SHUTDOWN_GRACE_S"])
    assert pod_spec(executor)["terminationGracePeriodSeconds"] > grace


@pytest.mark.parametrize("entry", sorted(BUILDS))
def test_every_reference_resolves(entry: str) -> None:
    build = BUILDS[entry]
    for deployment in build.of_kind("Deployment"):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        for container in pod_spec(deployment)["containers"]:
            container_env(build, container)  # raises on a missing ConfigMap or Secret
    for service in build.of_kind("Service"):
        assert _pods(build, service["spec"]["selector"]), service["metadata"]["name"]


def _pods(build: Build, selector: dict[str, str]) -> list[str]:
    return [
        d["metadata"]["name"]
        for d in build.of_kind("Deployment")
        if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()
    ]


@pytest.mark.parametrize("entry", sorted(BUILDS))
def test_every_deployment_has_a_budget_that_selects_it(entry: str) -> None:
    build = BUILDS[entry]
    covered: list[str] = []
    for pdb in build.of_kind("PodDisruptionBudget"):
        pods = _pods(build, pdb["spec"]["selector"]["matchLabels"])
        assert len(pods) == 1, f"{pdb['metadata']['name']} selects {pods}"
        covered += pods
        # A single planner with minAvailable 1 would block every node drain.
        assert "minAvailable" not in pdb["spec"] or pdb["spec"]["minAvailable"] == 0
    assert sorted(covered) == sorted(d["metadata"]["name"] for d in build.of_kind("Deployment"))


def test_keda_scales_executors_on_their_own_group_and_topic() -> None:
    build = BUILDS[K8S.relative_to(REPO).as_posix()]
    env = _executor_env(build)
    (scaled,) = build.of_kind("ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == "rollout-executor"
    assert scaled["spec"]["maxReplicaCount"] <= STAGE_ADVANCE.partitions, "members beyond the partitions idle"
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    meta = trigger["metadata"]
    defaults = ExecutorSettings.model_fields
    assert meta["consumerGroup"] == env.get("ROLLOUT_GROUP_ID", defaults["group_id"].default)
    assert meta["consumerGroup"] == defaults["group_id"].default
    assert meta["topic"] == env.get("ROLLOUT_TOPIC_PREFIX", "") + STAGE_ADVANCE.name
    assert meta["bootstrapServers"] == env["ROLLOUT_KAFKA_BOOTSTRAP"]
    auth = build.named("TriggerAuthentication", trigger["authenticationRef"]["name"])
    for ref in auth["spec"]["secretTargetRef"]:
        assert ref["key"] in build.named("Secret", ref["name"])["stringData"]


def test_hpa_alternative_scales_executors_on_the_same_lag() -> None:
    build = BUILDS[(K8S / "hpa").relative_to(REPO).as_posix()]
    assert not build.of_kind("ScaledObject"), "KEDA and an HPA would fight over the replicas"
    env = _executor_env(build)
    (hpa,) = build.of_kind("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "rollout-executor"
    assert hpa["spec"]["maxReplicas"] <= STAGE_ADVANCE.partitions
    (metric,) = hpa["spec"]["metrics"]
    selector = metric["external"]["metric"]["selector"]["matchLabels"]
    assert selector["consumergroup"] == env.get("ROLLOUT_GROUP_ID", "rollout-executors")
    assert selector["topic"] == env.get("ROLLOUT_TOPIC_PREFIX", "") + STAGE_ADVANCE.name


# ---- generated docs ------------------------------------------------------------------------------


def test_configuration_doc_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    code = rollout(["config-docs", "--check", "--output", str(REPO / "docs" / "configuration.md")])
    assert code == 0, capsys.readouterr().err
