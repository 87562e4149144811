"""Readiness probes behind one small port, and the choice among them from settings."""

from __future__ import annotations

from rollout_common.ports import Bus
from rollout_health.probes.command import CommandProbe
from rollout_health.probes.http import HttpProbe
from rollout_health.probes.port import ProbeResult, ReadinessProbe
from rollout_health.probes.simulated import SimulatedProbe
from rollout_health.settings import ProbeKind, ReporterSettings


def build_probe(settings: ReporterSettings, *, bus: Bus) -> ReadinessProbe:
    match settings.probe:
        case ProbeKind.SIMULATED:
            return SimulatedProbe(settings.simulated, bus=bus, topic_prefix=settings.topic_prefix)
        case ProbeKind.COMMAND:
            return CommandProbe(settings.command)
        case ProbeKind.HTTP:
            return HttpProbe(settings.http)
        case ProbeKind.KUBERNETES:
            # Imported here: the other probes need no Kubernetes client.
            from rollout_health.probes.kubernetes import KubernetesProbe

            return KubernetesProbe(settings.kubernetes)


__all__ = ["CommandProbe", "HttpProbe", "ProbeResult", "ReadinessProbe", "SimulatedProbe", "build_probe"]
