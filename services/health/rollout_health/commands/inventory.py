"""`python -m rollout_health inventory`: lists and watches the cluster objects of a management
cluster (Cluster API or Fleet) and publishes their changes to rollout.inventory (see
`rollout_health.inventory`).

In the health service because it already observes the fleet's clusters from outside them: one
more reader of the management cluster, deployed next to the reporters, with its own (read-only)
role. One instance per management cluster; it keeps no lease, so run one.
"""

from __future__ import annotations

import logging

from lightkube import AsyncClient

from rollout_adapters.connections import kafka_bus
from rollout_adapters.kube.client import async_client
from rollout_adapters.shutdown import stop_on_signals
from rollout_common.ports import Bus
from rollout_common.topics.catalog import INVENTORY
from rollout_health.commands.lifecycle import serving, status_server, until_reachable
from rollout_health.inventory.checkpoint import Checkpoint
from rollout_health.inventory.watcher import ClusterKind, InventoryWatcher
from rollout_health.metrics import HealthMetrics
from rollout_health.settings import InventorySettings

log = logging.getLogger("rollout_health")


async def run_inventory(settings: InventorySettings) -> None:
    stop = stop_on_signals()
    bus = kafka_bus(settings, client_id="rollout-inventory-watcher")
    client = async_client(
        kubeconfig=settings.kubeconfig, context=settings.kube_context, field_manager="rollout-inventory"
    )
    watchers: list[InventoryWatcher] = []
    # Ready once every watch has listed: the inventory it publishes is complete from then on.
    status = status_server(settings, HealthMetrics(), ready=lambda: any(w.synced.is_set() for w in watchers))
    try:
        async with serving(status):
            # A stop while Kafka is unreachable ends the watcher's run as soon as it starts.
            await until_reachable(lambda: _create_topic(settings, bus), stop)
            watcher = _watcher(settings, client=client, bus=bus)
            watchers.append(watcher)
            log.info(
                "inventory watcher: %s clusters in %s", settings.cluster_kind, settings.namespace or "all namespaces"
            )
            await watcher.run(stop)
    finally:
        await client.close()
        await bus.close()


async def _create_topic(settings: InventorySettings, bus: Bus) -> None:
    if settings.create_topics:
        await bus.ensure_topics([settings.topic_spec(INVENTORY)])


def _watcher(settings: InventorySettings, *, client: AsyncClient, bus: Bus) -> InventoryWatcher:
    return InventoryWatcher(
        client=client,
        bus=bus,
        topic_prefix=settings.topic_prefix,
        kind=ClusterKind(settings.cluster_kind),
        namespace=settings.namespace,
        watch_groups=settings.fleet_groups,
        watch_control_planes=settings.kubeadm_control_planes,
        checkpoint=Checkpoint(settings.checkpoint_file) if settings.checkpoint_file else None,
        watch_timeout_s=settings.watch_timeout_s,
    )
