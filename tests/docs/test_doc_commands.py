"""Every command the README and docs/ show is run by a test.

This module follows docs/operations.md from top to bottom like a person at a terminal would, and
runs each command it shows: the embedded demo (in the background, it is paced); the local broker
and Redis of `make kafka` / `make redis` with the four services started by the page's own lines
(the README's walkthrough shows the same lines); the Docker Compose file; backups, offsets,
status, metrics, dead letters. Then the operator actions of docs/troubleshooting.md, the CLI
release and `kcat -C` of docs/events.md, and what the long `make` targets would run. Commands
shown elsewhere are run by the tests named in `ELSEWHERE`, and `test_every_shown_command_is_run`
fails for a new command nobody runs.

What cannot exist on a machine without a container engine or a Kubernetes cluster is replaced,
and only that: `docker compose` by `ComposeStandIn` (each service a local process made from the
Compose file's own command, environment and healthcheck), `docker run IMAGE CMD` by CMD in this
checkout's venv, `/opt/kafka/bin/*.sh` by the same Kafka tools from the broker's jars,
`kubectl apply -k` by `kubectl kustomize` (the render `apply` would send), and `kubectl
port-forward` by the executor's own port. Fixed addresses on the pages (localhost:9094, :6379,
:8080, :9464, and the example addresses of the `export` line, which stand for what `make`
printed) become this run's.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from compose_standin import ComposeStandIn
from kafka_tools import in_tools, install_tools
from shown_commands import REPO, shown_commands

from rollout_devenv import free_port, stop_processes
from rollout_planner.engine.snapshot import FORMAT_VERSION

# The walk is one fixture that runs for minutes (about 3 on a quiet machine, over 10 with both
# cores busy): its own budget ends it before the per-test timeout would (that timeout fires inside
# the fixture and errors every test of the module).
_WALK_BUDGET_S = 1200.0
pytestmark = [pytest.mark.integration, pytest.mark.timeout(_WALK_BUDGET_S + 600)]

_T = TypeVar("_T")
# what the tests have checked so far; the last test checks the rest
_SECTIONS_CHECKED_BY_A_TEST: set[str] = set()

VENV_BIN = Path(sys.executable).parent
COMPOSE = "docker compose -f deploy/compose/compose.yaml"
RELEASE = "1.31.13-gke.1023000"

_README_TEST = "tests/docs/test_readme_commands.py"
# Shown commands other tests run, and which.
ELSEWHERE = {
    "make test": "the whole suite: .ci/run runs exactly this",
    "rollout retry --all": "tests/service/test_operator_acks.py (a failed upgrade retried through an executor)",
    "rollout validate tests/scenarios/gate1-25-mu5.yaml": _README_TEST,
    "rollout plan ../shared/conformance/cases/fleet-200-10pct-mup1.yaml": _README_TEST,
    "rollout simulate ../shared/conformance/cases/gke-bank-soak.yaml": _README_TEST,
    "rollout simulate ../shared/conformance/cases/gke-bank-soak.yaml --json": _README_TEST,
    " ".join(
        [
            """echo '{"eventId": "rel-1", "channel": "regular", "targets": {"1.30": "1.31.13-gke.1023000"}}' |""",
            "kcat -P -b localhost:9092 -t rollout.release-targets -k regular",
            "-H ce_specversion=1.0 -H ce_id=rel-1 -H ce_source=platform-team",
            "-H ce_type=io.rollout.release_target.v1 -H content-type=application/json",
        ]
    ): "tests/e2e/test_kcat.py (with the real kcat)",
    ".venv/bin/pytest tests/chaos": "make test runs tests/chaos with these defaults (the suite and make chaos-test)",
    "make chaos-test": "make test runs this target beside the suite (tests/chaos/test_fault_injection.py)",
    "make kube": "tests/kube/test_devenv_kube.py (runs it, uses the apiserver, stops it with Ctrl-C)",
    "make kube-build": "tests/kube/test_devenv_kube.py (through make kube, which depends on it)",
    "make helm-build": "make test runs the same build as helm-build-background; tests/kube/test_helm_chart.py uses it",
    "make failover": "the tests it runs are tests/failover's failover_e2e ones, which make test runs beside the suite",
    "make soak-health-test": "make test runs this target beside the suite (tests/load/test_health_soak.py)",
    "make soak-health": "its harness (bench.soak_health) is the one make soak-health-test runs, at 500/s for 60 s",
    **{
        f"rollout demo --scenario tests/scenarios/{scenario} --status-at {at}": (
            "tests/docs/test_gates_examples.py (runs it and finds the lines the page quotes)"
        )
        for scenario, at in (
            ("chk1-approval-before-and-after.yaml", "3d20m"),
            ("chk3-weekly-start-window.yaml", "2h"),
            ("chk4-patch-and-minor-intervals.yaml", "1h"),
        )
    },
}


@dataclass
class Ran:
    shown: str
    ran: str
    returncode: int
    out: str
    err: str


@dataclass
class Terminal:
    """A person's shell following the page: its working directory and what `export` set."""

    cwd: Path
    env: dict[str, str]
    addresses: dict[str, str] = field(default_factory=dict)
    ran: dict[str, Ran] = field(default_factory=dict)
    background: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: dict[str, tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)  # section -> what stopped it
    deadline: float = field(default_factory=lambda: time.monotonic() + _WALK_BUDGET_S)

    def section(self, name: str, step: Callable[[], _T], *, needs: tuple[str, ...] = ()) -> _T | None:
        """Run one section of the walk. A section that raises is recorded, not raised: the tests of
        its commands report it, and the sections that do not need it still run, so one broken
        command is one failed test (it used to take the whole module down as errors)."""
        if missing := [n for n in needs if n in self.broken]:
            self.broken[name] = f"not run: it needs the section {missing[0]!r}, which broke"
            return None
        if time.monotonic() > self.deadline:
            self.broken[name] = f"not run: the walk's budget of {_WALK_BUDGET_S:g} s ran out before it"
            return None
        try:
            return step()
        except Exception as exc:  # reported by the tests of the section's commands
            self.broken[name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
            return None

    def require(self, *sections: str) -> None:
        """Fail the calling test with what broke in the sections it checks."""
        _SECTIONS_CHECKED_BY_A_TEST.update(sections)
        broken = {name: self.broken[name] for name in sections if name in self.broken}
        if broken:
            pytest.fail("\n".join(f"section {name!r} of the walk broke: {why}" for name, why in broken.items()))

    def translate(self, text: str) -> str:
        for shown, here in self.addresses.items():
            text = text.replace(shown, here)
        return text

    def record(self, shown: str, ran: str, done: subprocess.CompletedProcess[str]) -> Ran:
        result = Ran(shown, ran, done.returncode, done.stdout, done.stderr)
        self.ran[shown] = result
        return result

    def run(
        self, shown: str, *, ran: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> Ran:
        """Run the shown command (or its stand-in `ran`) in bash; record what came of it."""
        command = ran if ran is not None else self.translate(_text(shown))
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=cwd or self.cwd,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        return self.record(shown, command, done)

    def start(self, shown: str, *, extra_env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        """A long-running command, as in a terminal of its own."""
        command = self.translate(_text(shown))
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["bash", "-c", "exec " + command if "=" not in command.split()[0] else command],
                cwd=self.cwd,
                env=self.env | extra_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.background.append(process)
        self.started[shown] = (command, process, log)
        return process

    def record_started(self) -> None:
        """A service line succeeded if its process is still serving at the end of the walk."""
        for shown, (command, process, log) in self.started.items():
            tail = log.read_text(errors="replace")[-3000:]
            if (code := process.poll()) is None:
                self.ran[shown] = Ran(shown, command, 0, "still running", tail)
            else:
                self.ran[shown] = Ran(shown, command, code, "", tail)

    def stop_all(self) -> None:
        # `make kafka` runs the broker in a child: like Ctrl-C in a terminal, stop the whole command.
        stop_processes(self.background, grace_s=30, whole_group=True)
        for process in self.background:
            if process.stdout is not None:
                process.stdout.close()


def _text(shown: str) -> str:
    """The command of a "page: command" key."""
    return shown.split(": ", 1)[1]


def _shown(page: str) -> dict[str, str]:
    """The commands shown on `page`, by text."""
    return {s.text: str(s) for s in shown_commands() if s.page == page}


def _announce(process: subprocess.Popen[str], prefix: str, *, timeout_s: float = 120) -> str:
    """The value of the `PREFIX=value` line a `make kafka` / `make redis` prints once ready."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if selector.select(timeout=1.0):
            line = process.stdout.readline()
            if line.startswith(prefix + "="):
                return line.strip().split("=", 1)[1]
            if not line and process.poll() is not None:
                break
    raise AssertionError(f"no {prefix}= line within {timeout_s:g} s (exit {process.poll()})")


def _within(predicate: Callable[[], bool], *, timeout_s: float) -> bool:
    """Whether the condition came true within the bound (checked every 0.3 s)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def _until(predicate: Callable[[], bool], *, what: str, timeout_s: float = 120) -> None:
    if not _within(predicate, timeout_s=timeout_s):
        raise AssertionError(f"timed out waiting for {what} ({timeout_s:g} s)")


def _caught_up(url: str, *, clusters: int) -> bool:
    """The status document describes `clusters` clusters and the planner's last decided batch."""
    client = redis.Redis.from_url(url)
    try:
        status, checkpoint = client.get("rollout:status"), client.get("rollout:planner/checkpoint")
    finally:
        client.close()
    if not status or not checkpoint:
        return False
    document = json.loads(status)
    return bool(document["clusters"] == clusters and document["batch"] == json.loads(checkpoint)["batch"])


def _status(url: str) -> dict[str, object]:
    client = redis.Redis.from_url(url)
    try:
        raw = client.get("rollout:status")
    finally:
        client.close()
    return json.loads(raw) if raw else {}


def _rollout_states(url: str) -> list[str]:
    return [str(r["state"]) for r in _status(url).get("rollouts", [])]  # type: ignore[union-attr]


def _answers(port: int, path: str) -> bool:
    return subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}{path}"], capture_output=True).returncode == 0


# -- the page's sections ------------------------------------------------------------------------


@dataclass
class _Job:
    shown: str
    command: str
    process: subprocess.Popen[str]
    out: Path
    err: Path


def _start_job(term: Terminal, shown: str, *, cwd: Path, files: Path) -> _Job:
    """A command that takes a while on its own (the paced demo): it runs while the walk goes on."""
    command = _text(shown)
    out, err = files / f"{len(term.ran)}-{len(command)}.out", files / f"{len(term.ran)}-{len(command)}.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            ["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=term.env, stdout=stdout, stderr=stderr, text=True
        )
    return _Job(shown, command, process, out, err)


def _finish_job(term: Terminal, job: _Job) -> None:
    job.process.wait(180)
    done = subprocess.CompletedProcess([], job.process.returncode, job.out.read_text(), job.err.read_text())
    term.record(job.shown, job.command, done)


def _one_process(term: Terminal, shown: dict[str, str], files: Path) -> list[_Job]:
    """The paced demos run in the background (about 40 s each, mostly waiting); the rest waits not for them."""
    jobs = [
        _start_job(term, shown["make demo"], cwd=REPO, files=files),
        _start_job(term, shown["rollout demo --no-live"], cwd=term.cwd, files=files),
    ]
    term.run(shown["rollout demo --scenario tests/scenarios/gate1-25-mu5.yaml --json"])
    return jobs


def _local_services(term: Terminal, shown: dict[str, str], logs: Path) -> str:
    """`make kafka`, `make redis`, the exported addresses, the four services, apply and release."""
    infra = {}
    for target, prefix in (("kafka", "KAFKA_BOOTSTRAP"), ("redis", "REDIS_URL")):
        process = subprocess.Popen(
            ["make", "-s", target], cwd=REPO, env=term.env, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        term.background.append(process)  # type: ignore[arg-type]
        infra[prefix] = _announce(process, prefix)
        term.ran[shown[f"make {target}"]] = Ran(shown[f"make {target}"], f"make -s {target}", 0, f"{prefix}=...", "")
    export = shown["export ROLLOUT_KAFKA_BOOTSTRAP=127.0.0.1:9092 ROLLOUT_REDIS_URL=redis://127.0.0.1:6379/0"]
    term.addresses |= {"127.0.0.1:9092": infra["KAFKA_BOOTSTRAP"], "redis://127.0.0.1:6379/0": infra["REDIS_URL"]}
    # `export` changes the terminal itself: bash prints the result, the terminal keeps it.
    printed = term.run(export, ran=term.translate(_text(export)) + " && env | grep ^ROLLOUT_")
    term.env |= dict(line.split("=", 1) for line in printed.out.splitlines())
    # 8080 and 9464 may be taken on a test machine; the compose stack below uses its own too.
    planner_port, executor_port = free_port(), free_port()
    ports = {
        "python -m rollout_planner.service": {"ROLLOUT_HTTP_PORT": str(planner_port)},
        # Its simulated upgrades take minutes; at the end of the walk it need not finish them.
        "python -m rollout_executor": {"ROLLOUT_METRICS_PORT": str(executor_port), "ROLLOUT_SHUTDOWN_GRACE_S": "1"},
    }
    for text in (
        "python -m rollout_planner.service",
        "python -m rollout_executor",
        """ROLLOUT_CLUSTERS='["c-01","c-02"]' python -m rollout_health reporter""",
        "python -m rollout_health monitor",
    ):
        term.start(shown[text], extra_env=ports.get(text, {}), log=logs / f"{text.split()[-1]}.log")
    # The planner is ready once it has a sequence to plan with: alive is all it can be before `apply`.
    _until(lambda: _answers(planner_port, "/healthz") and _answers(executor_port, "/readyz"), what="the services")
    term.run(shown["rollout apply tests/scenarios/gate1-25-mu5.yaml"])
    term.run(shown[f"rollout release --channel regular --target 1.30={RELEASE}"])
    _until(lambda: _rollout_states(infra["REDIS_URL"]) == ["RUNNING"], what="the released rollout in the status")
    term.run(shown["rollout status"])
    return infra["REDIS_URL"]


def _compose(term: Terminal, shown: dict[str, str], compose: ComposeStandIn) -> None:
    up = shown[f"{COMPOSE} up --build -d"]
    compose.up()
    term.ran[up] = Ran(up, "ComposeStandIn.up()", 0, "", "")
    term.addresses |= compose.host_addresses()
    # Something for the dead-letter section to find: a release target that is not JSON.
    subprocess.run(
        ["kcat", "-P", "-b", compose.bootstrap, "-t", "rollout.release-targets", "-k", "regular"],
        input=b"not json\n",
        check=True,
        timeout=30,
    )
    redis_host = "--redis redis://localhost:6379/0"
    term.run(shown[f"rollout apply tests/scenarios/gate1-25-mu5.yaml --bootstrap localhost:9094 {redis_host}"])
    compose.wait_healthy()  # `up -d` does not wait; the planner's healthcheck passes once it has the sequence
    # The host's and the container's CLI are compared below: both read a document that describes the
    # applied fleet and that the planner has brought up to its last batch, which no later one replaces.
    _until(lambda: _caught_up(compose.redis_url, clusters=25), what="the status document of the applied fleet")
    term.run(shown[f"rollout status --bootstrap localhost:9094 {redis_host}"])
    in_planner = shown[f"{COMPOSE} exec planner rollout status"]
    term.run(in_planner, ran="rollout status", env=term.env | compose.exec_env("planner"))
    for overlay in ("deploy/k8s", "deploy/k8s/hpa"):
        term.run(shown[f"kubectl apply -k {overlay}"], ran=f"kubectl kustomize {overlay}")
    scale = shown[f"{COMPOSE} up -d --scale executor=4"]
    compose.scale("executor", 4)
    term.ran[scale] = Ran(scale, "ComposeStandIn.scale('executor', 4)", 0, "", "")


def _upgrade_and_backup(term: Terminal, shown: dict[str, str], compose: ComposeStandIn) -> None:
    term.run(shown[_snapshot_format_line()])
    new_image = "python -c 'from rollout_planner.engine.snapshot import FORMAT_VERSION; print(FORMAT_VERSION)'"
    term.run(shown[f"docker run --rm rollout:NEW {new_image}"], ran=new_image)
    term.run(shown["redis-cli -u redis://localhost:6379/0 BGSAVE"])
    lastsave = shown["redis-cli -u redis://localhost:6379/0 LASTSAVE"]
    _until(lambda: (compose.redis_dir / "dump.rdb").is_file(), what="the BGSAVE dump")
    term.run(lastsave)
    copy = shown[f"{COMPOSE} cp redis:/data/dump.rdb ./rollout-redis.rdb"]
    compose.copy_out("redis:/data/dump.rdb", term.cwd / "rollout-redis.rdb")
    term.ran[copy] = Ran(copy, "ComposeStandIn.copy_out", 0, "", "")
    checkpoint = "redis-cli -u redis://localhost:6379/0 GET rollout:planner/checkpoint | "
    checkpoint += """python -c 'import json, sys; print(json.load(sys.stdin)["offsets"])'"""
    term.run(shown[checkpoint])
    # "reset the group, one partition at a time, with the planner stopped"
    compose.stop("planner")
    reset = (
        f"{COMPOSE} exec kafka /opt/kafka/bin/kafka-consumer-groups.sh --bootstrap-server kafka:9092 "
        "--group rollout-planner --reset-offsets --topic rollout.release-targets:0 --to-offset 42 --execute"
    )
    inner = reset.removeprefix(f"{COMPOSE} exec kafka ")
    term.run(shown[reset], ran=in_tools(compose.in_container(inner), compose.tools_bin))
    compose.start("planner")
    term.addresses |= compose.host_addresses()  # the restarted planner listens on a new port


# Generous bounds for conditions, not waits: a loaded machine takes them, a quiet one returns at once.
_WATCH_SHOWS_S = 20.0  # per pause/resume round; a round the watch missed (it had not joined yet) goes again
_WATCH_ROUNDS_S = 240.0
_WATCH_EXITS_S = 120.0  # after Ctrl-C it leaves its consumer group and closes its connections
_FOLLOW_S = 120.0


def _status_block(term: Terminal, shown: dict[str, str], status_url: str) -> None:
    for text in ("rollout status --stage prod", "rollout status --json", "rollout demo --status-at 9h10m"):
        term.run(shown[text])
    term.run(shown["rollout watch --plain --from-beginning --count 20"])
    # `rollout watch` runs until Ctrl-C: it watches while the troubleshooting page's operator
    # commands pause and resume the rollout, then Ctrl-C is pressed. It starts at the topic's end
    # once its new consumer group has joined, which takes a while: pause and resume go again
    # until it has shown both.
    watch = shown["rollout watch"]
    screen, errors = term.cwd / "watch.out", term.cwd / "watch.err"
    with screen.open("w") as out, errors.open("w") as err:
        process = subprocess.Popen(
            ["rollout", "watch"], cwd=term.cwd, env=term.env, stdout=out, stderr=err, text=True, start_new_session=True
        )
    term.background.append(process)  # type: ignore[arg-type]  # stopped by the walk's fixture whatever happens here

    def shown_both() -> bool:
        text = screen.read_text()
        return bool(_WATCHED_PAUSE.search(text) and _WATCHED_RESUME.search(text))

    deadline = time.monotonic() + _WATCH_ROUNDS_S
    while True:
        _troubleshooting(term, status_url)
        if _within(shown_both, timeout_s=_WATCH_SHOWS_S) or time.monotonic() > deadline:
            break
    process.send_signal(signal.SIGINT)
    try:
        process.wait(_WATCH_EXITS_S)
    except subprocess.TimeoutExpired:
        note = f"\n(still running {_WATCH_EXITS_S:g} s after Ctrl-C)"
        term.record(watch, "rollout watch, Ctrl-C", subprocess.CompletedProcess([], -1, screen.read_text(), note))
        return
    pressed = subprocess.CompletedProcess([], process.returncode, screen.read_text(), errors.read_text())
    term.record(watch, "rollout watch, Ctrl-C after the troubleshooting commands", pressed)


_WATCHED_PAUSE = re.compile(r"rollout_transition .*PAUSED")
_WATCHED_RESUME = re.compile(r"rollout_transition .*RUNNING")


def _metrics_and_dead_letters(term: Terminal, shown: dict[str, str], compose: ComposeStandIn) -> None:
    term.run(shown["curl -s localhost:8080/metrics | grep '^rollout_'"])
    forward = shown["kubectl -n rollout port-forward deploy/rollout-executor 9464 &"]
    term.ran[forward] = Ran(forward, "(the executor's port is local already)", 0, "", "")
    term.run(shown["curl -s localhost:9464/metrics | grep '^rollout_'"])
    consume = (
        f"{COMPOSE} exec kafka /opt/kafka/bin/kafka-console-consumer.sh --bootstrap-server kafka:9092 "
        "--topic rollout.dead-letter --from-beginning --property print.headers=true --property print.key=true "
        "--timeout-ms 5000"
    )
    inner = consume.removeprefix(f"{COMPOSE} exec kafka ")
    term.run(shown[consume], ran=in_tools(compose.in_container(inner), compose.tools_bin))


def _troubleshooting(term: Terminal, status_url: str) -> None:
    shown = _shown("docs/troubleshooting.md")
    subprocess.run(["rollout", "pause", "--all"], cwd=term.cwd, env=term.env, check=True, capture_output=True)
    _until(lambda: _rollout_states(status_url) == ["PAUSED"], what="the paused rollout")
    term.run(shown["rollout resume --all"])
    _until(lambda: _rollout_states(status_url) == ["RUNNING"], what="the resumed rollout")
    term.run(shown[f"rollout soak --stage prod --version {RELEASE} --soak 0d"])


_RETRY = 'rollout retry --rollout main-1 --cluster c-03 || echo "exit $?"'
_REJECTED = 'rollout cancel --rollout main-9 || echo "exit $?"'


def _operator_commands(term: Terminal, shown: dict[str, str]) -> None:
    """docs/operations.md, operator commands (OPS-3, OPS-4, OPS-5): each prints the planner's answer.
    The retry goes last: an engine that does not apply retries yet may take it for something else."""
    for text in ("rollout pause --rollout main-1", "rollout resume --rollout main-1", _REJECTED, _RETRY):
        term.run(shown[text])


_SEED_2 = "tests/chaos/test_fault_injection.py::test_a_rollout_survives_a_seeded_fault_schedule[2]"


def _long_runs(term: Terminal) -> None:
    """The chaos, soak and benchmark runs take 10 minutes to hours, and the suite runs their CI
    variants itself: what these lines would run is checked instead (`make -n`, `--collect-only`)."""
    shown = _shown("docs/reliability.md") | _shown("README.md")
    one_seed = f"ROLLOUT_CHAOS_SEEDS=3 .venv/bin/pytest '{_SEED_2}'"
    term.run(shown[one_seed], ran=one_seed + " --collect-only -q -p no:cacheprovider", cwd=REPO)
    for target in ("chaos", "soak", "bench"):
        term.run(shown[f"make {target}"], ran=f"make -n {target}", cwd=REPO)


def _events_page(term: Terminal) -> None:
    """docs/events.md: publish with the CLI while kcat follows the progress topic."""
    shown = _shown("docs/events.md")
    term.addresses["localhost:9092"] = term.addresses["127.0.0.1:9092"]
    follow = shown["kcat -C -b localhost:9092 -t rollout.progress -f '%h %s\\n'"]
    screen, errors = term.cwd / "kcat.out", term.cwd / "kcat.err"
    with screen.open("w") as out, errors.open("w") as err:
        kcat = subprocess.Popen(
            ["bash", "-c", "exec " + term.translate(_text(follow))],
            cwd=term.cwd,
            env=term.env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    term.background.append(kcat)
    term.run(shown[f"rollout release --channel regular --target 1.30={RELEASE} --id rel-1"])
    # kcat reads from the beginning: followed once the planner's answer to rel-1 has come through
    # (a new rollout's transition, or a notice naming the event)
    _within(lambda: "rel-1" in screen.read_text(), timeout_s=_FOLLOW_S)
    kcat.terminate()
    kcat.wait(_FOLLOW_S)
    followed_out = screen.read_text()
    # kcat exits with SIGTERM's status; reading is what it was asked to do.
    followed = subprocess.CompletedProcess([], 0 if followed_out else kcat.returncode, followed_out, errors.read_text())
    term.record(follow, "kcat -C ..., stopped after the release", followed)


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Terminal]:
    home = tmp_path_factory.mktemp("terminal")
    for name in ("tests", "deploy"):
        (home / name).symlink_to(REPO / name)
    logs = tmp_path_factory.mktemp("logs")
    env = dict(os.environ) | {"PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    for name in [k for k in env if k.startswith("ROLLOUT_")]:
        del env[name]
    term = Terminal(cwd=home, env=env)
    compose = ComposeStandIn(
        REPO / "deploy" / "compose" / "compose.yaml",
        work=tmp_path_factory.mktemp("compose"),
        tools_bin=install_tools(tmp_path_factory.mktemp("opt-kafka-bin")),
        base_env=env,
    )
    operations = _shown("docs/operations.md")
    demos: list[_Job] = []
    try:
        demos = term.section("demo", lambda: _one_process(term, operations, logs)) or []
        status_url = term.section("local services", lambda: _local_services(term, operations, logs))
        term.section("compose", lambda: _compose(term, operations, compose))
        term.section("backup", lambda: _upgrade_and_backup(term, operations, compose), needs=("compose",))
        term.section("status", lambda: _status_block(term, operations, str(status_url)), needs=("local services",))
        term.section("operator commands", lambda: _operator_commands(term, operations), needs=("local services",))
        term.section("metrics", lambda: _metrics_and_dead_letters(term, operations, compose), needs=("compose",))
        term.section("long runs", lambda: _long_runs(term))
        for job in demos:
            term.section("demo", lambda job=job: _finish_job(term, job))  # type: ignore[misc]
        term.record_started()
        term.section(
            "activate",
            lambda: term.run(
                "README.md: . .venv/bin/activate", ran=". .venv/bin/activate && command -v rollout", cwd=REPO
            ),
        )
        term.section("events", lambda: _events_page(term), needs=("local services",))
        yield term
    finally:
        for job in demos:
            if job.process.poll() is None:
                job.process.kill()
                job.process.wait(10)
        # The two stacks stop side by side: each broker's shutdown takes seconds.
        with ThreadPoolExecutor(2) as pool:
            for stopping in [pool.submit(term.stop_all), pool.submit(compose.down)]:
                stopping.result()
        shutil.rmtree(home, ignore_errors=True)


_CHECKED_BY_A_TEST: set[str] = set()


def _ok(walk: Terminal, shown: str) -> Ran:
    _CHECKED_BY_A_TEST.add(shown)
    if shown not in walk.ran:
        pytest.fail(f"{shown} was not run; sections of the walk that broke: {walk.broken or 'none'}")
    result = walk.ran[shown]
    assert result.returncode == 0, f"{shown}\nran: {result.ran}\n{result.out[-2000:]}\n{result.err[-3000:]}"
    return result


def test_every_shown_command_is_run(walk: Terminal) -> None:
    """By this walk or by the test ELSEWHERE names; the same command on two pages is run once.
    The commands a broken section did not reach are reported by that section's tests, not here."""
    run_here = {_text(key).removesuffix("&").rstrip() for key in walk.ran}
    missing = [str(s) for s in shown_commands() if s.command not in run_here and s.command not in ELSEWHERE]
    assert missing == [] or walk.broken, missing
    for where in ELSEWHERE.values():
        path = where.split()[0]
        assert not path.startswith("tests/") or (REPO / path).is_file(), where


@pytest.mark.parametrize("shown", ["docs/operations.md: make demo", "docs/operations.md: rollout demo --no-live"])
def test_the_demo_runs_the_builtin_fleet_to_its_summary(walk: Terminal, shown: str) -> None:
    """The README's first command; `rollout demo --no-live` (README and operations) is what it runs, in plain lines."""
    walk.require("demo")
    out = _ok(walk, shown).out
    assert re.search(r"demo: 300 clusters, \d+ batches, .* rollout: demo-1 COMPLETED", out), out[-1000:]


def test_the_local_services_start_the_released_rollout(walk: Terminal) -> None:
    walk.require("local services")
    applied = _ok(walk, "docs/operations.md: rollout apply tests/scenarios/gate1-25-mu5.yaml")
    assert "25 cluster(s) published to the inventory" in applied.out
    status = _ok(walk, "docs/operations.md: rollout status").out
    assert "RUNNING" in status and RELEASE in status
    for service in ("python -m rollout_planner.service", "python -m rollout_health monitor"):
        assert _ok(walk, f"docs/operations.md: {service}").out == "still running"


def test_compose_stack_answers_the_host_cli_and_its_own_containers(walk: Terminal) -> None:
    walk.require("compose")
    on_host = _ok(
        walk, "docs/operations.md: rollout status --bootstrap localhost:9094 --redis redis://localhost:6379/0"
    )
    in_planner = _ok(walk, f"docs/operations.md: {COMPOSE} exec planner rollout status")
    assert on_host.out == in_planner.out


def test_kustomize_renders_what_apply_would_send(walk: Terminal) -> None:
    walk.require("compose")
    full = _ok(walk, "docs/operations.md: kubectl apply -k deploy/k8s").out
    hpa = _ok(walk, "docs/operations.md: kubectl apply -k deploy/k8s/hpa").out
    assert "kind: ScaledObject" in full and "kind: ScaledObject" not in hpa
    assert "kind: HorizontalPodAutoscaler" in hpa
    # What `kubectl -n rollout port-forward deploy/rollout-executor 9464` needs to exist.
    assert re.search(r"kind: Deployment\nmetadata:\n(  .*\n)*  name: rollout-executor\n  namespace: rollout\n", full)
    assert "containerPort: 9464" in full


def test_the_stored_snapshot_format_is_the_one_the_image_reads(walk: Terminal) -> None:
    walk.require("backup")
    stored = _ok(walk, f"docs/operations.md: {_snapshot_format_line()}").out.strip()
    image = _ok(walk, f"docs/operations.md: docker run --rm rollout:NEW {_format_version_line()}").out.strip()
    assert stored == image == str(FORMAT_VERSION)


def _snapshot_format_line() -> str:
    return (
        "redis-cli -u redis://localhost:6379/0 GET rollout:planner/snapshot | head -1 | "
        """python -c 'import json, sys; line = sys.stdin.readline(); """
        """print(line.split()[1] if line.startswith("rollout-snapshot ") else json.loads(line)["format"])'"""
    )


def _format_version_line() -> str:
    return "python -c 'from rollout_planner.engine.snapshot import FORMAT_VERSION; print(FORMAT_VERSION)'"


def test_backup_and_offsets(walk: Terminal) -> None:
    walk.require("backup")
    assert _ok(walk, "docs/operations.md: redis-cli -u redis://localhost:6379/0 BGSAVE").out.strip() == (
        "Background saving started"
    )
    assert int(_ok(walk, "docs/operations.md: redis-cli -u redis://localhost:6379/0 LASTSAVE").out) > 1_700_000_000
    assert (walk.cwd / "rollout-redis.rdb").read_bytes().startswith(b"REDIS")
    offsets = _ok(
        walk,
        "docs/operations.md: redis-cli -u redis://localhost:6379/0 GET rollout:planner/checkpoint | "
        """python -c 'import json, sys; print(json.load(sys.stdin)["offsets"])'""",
    ).out
    assert "'rollout.release-targets:0': 1" in offsets, offsets
    reset = next(r for s, r in walk.ran.items() if "--reset-offsets" in s)
    assert re.search(r"rollout-planner\s+rollout.release-targets\s+0\s+\d+", reset.out), reset.out


def test_status_views(walk: Terminal) -> None:
    walk.require("status")
    prod = _ok(walk, "docs/operations.md: rollout status --stage prod").out
    assert "prod" in prod
    document = json.loads(_ok(walk, "docs/operations.md: rollout status --json").out)
    assert [r["state"] for r in document["rollouts"]] == ["RUNNING"]
    plain = _ok(walk, "docs/operations.md: rollout watch --plain --from-beginning --count 20").out.splitlines()
    assert len(plain) == 20
    watched = _ok(walk, "docs/operations.md: rollout watch").out
    assert _WATCHED_PAUSE.search(watched) and _WATCHED_RESUME.search(watched), watched
    assert "T+9h10m" in _ok(walk, "docs/operations.md: rollout demo --status-at 9h10m").out


def test_metrics_and_dead_letters(walk: Terminal) -> None:
    walk.require("metrics")
    planner = _ok(walk, "docs/operations.md: curl -s localhost:8080/metrics | grep '^rollout_'").out
    assert "rollout_planner_dead_letters" in planner
    executor = _ok(walk, "docs/operations.md: curl -s localhost:9464/metrics | grep '^rollout_'").out
    assert "rollout_executor_batches" in executor
    letters = next(r for s, r in walk.ran.items() if "kafka-console-consumer.sh" in s)
    assert "dlq_reason:" in letters.out and "not json" in letters.out, letters.out


def test_troubleshooting_actions(walk: Terminal) -> None:
    """Resume brought the rollout back to RUNNING (the walk waits for it); the planner took the soak override.
    What is missing here says which section broke; a broken watch (same section) is test_status_views' failure."""
    _ok(walk, "docs/troubleshooting.md: rollout resume --all")
    _ok(walk, f"docs/troubleshooting.md: rollout soak --stage prod --version {RELEASE} --soak 0d")
    progress = _ok(walk, "docs/events.md: kcat -C -b localhost:9092 -t rollout.progress -f '%h %s\\n'").out
    assert re.search(r'"kind":\s*"command_ack".*"accepted":\s*true.*"reason":\s*"soak_override applied"', progress)


def test_operator_commands_print_the_planners_answer_and_exit_by_it(walk: Terminal) -> None:
    """OPS-3: accepted is exit 0, rejected is exit 1 with the planner's reason (OPS-5: unknown rollout)."""
    walk.require("operator commands")
    for action in ("pause", "resume"):
        out = _ok(walk, f"docs/operations.md: rollout {action} --rollout main-1").out
        assert out.startswith(f"accepted: {action} cmd-"), out
        assert out.rstrip().endswith(f"for rollout main-1: {action} applied"), out
    rejected = _ok(walk, f"docs/operations.md: {_REJECTED}")
    assert rejected.out == "exit 1\n"
    assert rejected.err.startswith("rejected: cancel cmd-"), rejected.err
    assert rejected.err.rstrip().endswith("for rollout main-9: unknown rollout main-9"), rejected.err
    retried = _ok(walk, f"docs/operations.md: {_RETRY}")
    # OPS-4: c-03 has not failed, so the planner refuses and nothing runs again, as the page says
    assert retried.out == "exit 1\n", retried.out + retried.err
    assert retried.err.startswith("rejected: retry cmd-"), retried.err
    assert "for rollout main-1, cluster c-03: no failed upgrade to retry of cluster c-03" in retried.err, retried.err


def test_long_runs_are_what_the_pages_say(walk: Terminal) -> None:
    walk.require("long runs")
    one = _ok(walk, f"docs/reliability.md: ROLLOUT_CHAOS_SEEDS=3 .venv/bin/pytest '{_SEED_2}'").out
    assert re.findall(r"^tests/chaos/\S+$", one, re.M) == [_SEED_2], one
    made = {_text(key): result.out for key, result in walk.ran.items() if _text(key).startswith("make ")}
    assert "ROLLOUT_CHAOS_SEEDS=50" in made["make chaos"] and "pytest -q tests/chaos" in made["make chaos"]
    assert "ROLLOUT_SOAK_SECONDS=600" in made["make soak"]  # "for 10 minutes"
    assert "python -m bench.run" in made["make bench"]


def test_the_cli_release_and_kcat_follow_the_progress_topic(walk: Terminal) -> None:
    walk.require("events")
    _ok(walk, f"docs/events.md: rollout release --channel regular --target 1.30={RELEASE} --id rel-1")
    followed = _ok(walk, "docs/events.md: kcat -C -b localhost:9092 -t rollout.progress -f '%h %s\\n'").out
    assert "ce_type=io.rollout.rollout_transition.v1" in followed, followed[:2000]


def test_every_other_command_run_here_succeeds(walk: Terminal) -> None:
    """The commands no test above checked (this test runs last in the module), and every section of
    the walk no test above names: a broken command or section is one failure, reported once."""
    walk.require(*(name for name in walk.broken if name not in _SECTIONS_CHECKED_BY_A_TEST))
    for shown in walk.ran:
        if shown not in _CHECKED_BY_A_TEST:
            _ok(walk, shown)
