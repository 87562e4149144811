"""`python -m rollout_health reporter|inventory|monitor|checks [--config FILE]`.

- `reporter`: probes the configured clusters and publishes heartbeats until SIGTERM/SIGINT.
- `inventory`: lists and watches the cluster objects of a management cluster (Cluster API or
  Fleet) and publishes their changes to rollout.inventory (see `rollout_health.inventory`).
- `monitor`: supervises the faust monitor worker (restarts it with back-off), which turns
  heartbeats into readiness changes. `monitor-worker` is that worker itself, unsupervised.
- `checks`: evaluates the metric checks of the series the planner announces against Prometheus
  and publishes each result to rollout.check-results (CHK-2, see `rollout_health.checks.runner`);
  one per fleet.

Two processes rather than one: the reporter runs near the clusters it probes (one or many),
the monitor once per fleet (or a few, sharing the work through the consumer group).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from rollout_common import json_logging
from rollout_common.connection_settings import load, loggable
from rollout_common.errors import RolloutError
from rollout_health.commands.lifecycle import CommandSettings
from rollout_health.commands.monitor_worker import run_monitor_worker
from rollout_health.commands.reporter import run_reporter
from rollout_health.settings import CheckRunnerSettings, InventorySettings, MonitorSettings, ReporterSettings
from rollout_health.supervisor import supervise

log = logging.getLogger("rollout_health")

# Each command's settings and what a problem in them is called; `monitor` and `monitor-worker`
# read the monitor's.
_SETTINGS: dict[str, tuple[type[CommandSettings], str]] = {
    "reporter": (ReporterSettings, "reporter settings"),
    "inventory": (InventorySettings, "inventory settings"),
    "checks": (CheckRunnerSettings, "check runner settings"),
}
_MONITOR_SETTINGS: tuple[type[CommandSettings], str] = (MonitorSettings, "monitor settings")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = _load_settings(args.command, args.config)
    except RolloutError as exc:
        print(f"rollout_health: bad settings: {exc}", file=sys.stderr)
        return 2
    json_logging.configure(settings.log_level, quiet_libraries=False)
    log.info("%s starting", args.command, extra={"settings": loggable(settings)})
    try:
        return _run(args.command, args.config, settings)
    except RolloutError as exc:
        log.error("%s stopped on an error: %s", args.command, exc)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m rollout_health", description=__doc__)
    parser.add_argument("command", choices=["reporter", "inventory", "monitor", "monitor-worker", "checks"])
    parser.add_argument("--config", type=Path, help="YAML file of settings (ROLLOUT_* variables win)")
    return parser


def _load_settings(command: str, config: Path | None) -> CommandSettings:
    model, what = _SETTINGS.get(command, _MONITOR_SETTINGS)
    return load(model, config, what=what)


def _run(command: str, config: Path | None, settings: CommandSettings) -> int:
    """The command run to its end; its exit status."""
    if isinstance(settings, ReporterSettings):
        asyncio.run(run_reporter(settings))
        return 0
    if isinstance(settings, InventorySettings):
        # Imported here: the reporter and monitor need no Kubernetes client.
        from rollout_health.commands.inventory import run_inventory

        asyncio.run(run_inventory(settings))
        return 0
    if isinstance(settings, CheckRunnerSettings):
        # Imported here: the reporter and monitor need no Prometheus client.
        from rollout_health.commands.checks import run_checks

        asyncio.run(run_checks(settings))
        return 0
    if command == "monitor":
        worker_argv = ["monitor-worker"] + (["--config", str(config)] if config else [])
        return asyncio.run(supervise(settings, worker_argv))
    run_monitor_worker(settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
