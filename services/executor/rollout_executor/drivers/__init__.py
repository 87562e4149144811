"""Upgrade drivers behind one small port, and the choice among them from settings."""

from __future__ import annotations

from rollout_executor.drivers.cluster_api import ClusterApiDriver
from rollout_executor.drivers.command import CommandDriver
from rollout_executor.drivers.port import DriverOutcome, UpgradeDriver
from rollout_executor.drivers.simulated import SimulatedDriver
from rollout_executor.settings import DriverKind, ExecutorSettings


def build_driver(settings: ExecutorSettings) -> UpgradeDriver:
    match settings.driver:
        case DriverKind.SIMULATED:
            return SimulatedDriver(settings.simulated)
        case DriverKind.COMMAND:
            return CommandDriver(settings.command)
        case DriverKind.CLUSTER_API:
            return ClusterApiDriver(settings.cluster_api)


__all__ = ["ClusterApiDriver", "CommandDriver", "DriverOutcome", "SimulatedDriver", "UpgradeDriver", "build_driver"]
