"""A real three-node Apache Kafka cluster on loopback (KRaft, each node broker and controller in one
JVM), from the same Maven jars as the single broker, no Docker.

Every node has its own ports and data dir under the cluster's data dir, all are formatted with one
cluster id, and the three controllers form the metadata quorum. Internal topics are replicated
three times with two in sync, as a production cluster has them. A node can be killed, paused and
started again on its ports and data (`node(n).kill()`, `.pause()`, `.start()`), and the cluster
says which node is the active controller and which leads a partition.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollout_devenv._java import find_java
from rollout_devenv._proc import LOOPBACK, DevenvError, free_port, port_open, stop_processes
from rollout_devenv.kafka import (
    DEFAULT_START_TIMEOUT_S,
    BrokerPorts,
    KafkaBroker,
    _ports_in,
    _write_properties,
    fetch_kafka_jars,
    new_cluster_id,
    server_properties,
)

NODES = 3
_CLUSTER_ID_FILE = "cluster-id"
_QUORUM_STATE = Path("kraft-logs") / "__cluster_metadata-0" / "quorum-state"


def cluster_properties(*, node_id: int, ports: BrokerPorts, voters: str, log_dir: Path) -> dict[str, str]:
    """One node of the cluster: `server_properties` with its id, the three voters, and the internal
    topics replicated three times, two in sync."""
    props = server_properties(ports=ports, log_dir=log_dir)
    props.update(
        {
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            # What a production cluster sets for the topics no client configures (auto-created ones);
            # the services set their own topics' replication from their settings.
            "default.replication.factor": "3",
            # A killed node is fenced (and its partitions led elsewhere) after this, not after 9 s.
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "1000",
            # A paused follower leaves the in-sync set after this, not after 30 s.
            "replica.lag.time.max.ms": "8000",
        }
    )
    return props


class ClusterBroker(KafkaBroker):
    """One node of a `KafkaCluster`: given its id, its ports, the voters and the cluster id."""

    heap = ("-Xms128m", "-Xmx256m")

    def __init__(
        self, *, node_id: int, ports: BrokerPorts, voters: str, cluster_id: str, data_dir: Path, start_timeout_s: float
    ) -> None:
        super().__init__(data_dir=data_dir, start_timeout_s=start_timeout_s)
        self.node_id = node_id
        self.title = f"Kafka {self.version} node {node_id}"
        self.subject = f"Kafka node {node_id}"
        self._ports = ports
        self._voters = voters
        self._shared_cluster_id = cluster_id
        self._launched_at = time.monotonic()

    def __repr__(self) -> str:
        return f"ClusterBroker(node_id={self.node_id}, ports={self._ports}, {self._state})"

    def _cluster_id(self) -> str:
        return self._shared_cluster_id

    def _properties(self, ports: BrokerPorts) -> dict[str, str]:
        return cluster_properties(node_id=self.node_id, ports=ports, voters=self._voters, log_dir=self._log_dir)

    def launch(self) -> None:
        """Start the process without waiting: the first start of a cluster needs every node up
        before any of them has a quorum to be ready with."""
        started = time.monotonic()
        jars, java = fetch_kafka_jars(), find_java()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _write_properties(self._props_path, self._properties(self._choose_ports()))
        self._format(java=java, jars=jars)
        self._spawn([*self._jvm(java=java, jars=jars, heap=list(self.heap)), "kafka.Kafka", str(self._props_path)])
        self._launched_at = started

    def await_ready(self) -> None:
        """Wait until the node serves clients and the controller counts it as a live broker."""
        from rollout_devenv._cluster_probe import node_registered

        port = self.ports.broker
        self._await(lambda: port_open(port), why_not="its port never opened")
        self._await(
            lambda: node_registered(self.bootstrap, self.node_id),
            why_not="the controller never listed it as a live broker",
            interval_s=0.5,
        )
        self.last_start_s = time.monotonic() - self._launched_at

    def _start_once(self) -> None:
        self.launch()
        self.await_ready()


@dataclass(frozen=True, slots=True)
class QuorumState:
    leader: int
    epoch: int


def _quorum_state(node_dir: Path) -> QuorumState | None:
    """What a node last wrote about the metadata quorum's leader (None while it votes)."""
    try:
        data = json.loads((node_dir / _QUORUM_STATE).read_text())
    except (OSError, ValueError):
        return None
    leader = data.get("leaderId", -1)
    return QuorumState(leader=leader, epoch=data.get("leaderEpoch", -1)) if leader >= 0 else None


class KafkaCluster:
    """Three `ClusterBroker` nodes (ids 1 to 3) under `data_dir`, one cluster id, quorum of three.

    `data_dir` kept from an earlier run starts the same cluster again on the same ports.
    """

    def __init__(
        self, *, data_dir: Path | None = None, start_timeout_s: float = DEFAULT_START_TIMEOUT_S, nodes: int = NODES
    ) -> None:
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="rollout-kafka-cluster-")) if data_dir is None else data_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        id_file = self.data_dir / _CLUSTER_ID_FILE
        if not id_file.is_file():
            id_file.write_text(new_cluster_id() + "\n")
        self.cluster_id = id_file.read_text().strip()
        dirs = [self.data_dir / f"node-{n}" for n in range(1, nodes + 1)]
        ports = _distinct_ports([_ports_in(d / "server.properties") for d in dirs])
        voters = ",".join(f"{n}@{LOOPBACK}:{p.controller}" for n, p in enumerate(ports, start=1))
        self.nodes = [
            ClusterBroker(
                node_id=n,
                ports=p,
                voters=voters,
                cluster_id=self.cluster_id,
                data_dir=d,
                start_timeout_s=start_timeout_s,
            )
            for n, (p, d) in enumerate(zip(ports, dirs, strict=True), start=1)
        ]
        self.last_start_s: float | None = None

    def __repr__(self) -> str:
        return f"KafkaCluster(bootstrap={self.bootstrap!r}, running={[n.node_id for n in self.nodes if n.running]})"

    def node(self, node_id: int) -> ClusterBroker:
        return self.nodes[node_id - 1]

    @property
    def bootstrap(self) -> str:
        """Every node's client listener: clients find the cluster through whichever answers."""
        return ",".join(f"{LOOPBACK}:{node.ports.broker}" for node in self.nodes)

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    @property
    def log_path(self) -> Path:
        return self.nodes[0].log_path

    def client_settings(self) -> dict[str, Any]:
        return {}

    def start(self) -> None:
        """Start the nodes that are not running and return once the cluster takes group commits
        with every node live; a DevenvError names the node that did not come up."""
        from rollout_devenv._probe import broker_ready

        started = time.monotonic()
        try:
            down = [node for node in self.nodes if not node.running]
            for node in down:
                node.launch()
            for node in down:
                node.await_ready()
            deadline = time.monotonic() + self.nodes[0].start_timeout_s
            reason = ""
            while time.monotonic() < deadline:
                ready, reason = broker_ready(self.bootstrap, replication_factor=len(self.nodes))
                if ready:
                    self.last_start_s = time.monotonic() - started
                    return
                time.sleep(0.5)
            raise DevenvError(
                f"the Kafka cluster took no group commit ({reason}); see {self.data_dir}/node-*/kafka.log"
            )
        except BaseException:
            self.stop()
            raise

    def recover(self) -> None:
        """Every node running again after a test's faults: paused ones resumed, killed ones started."""
        for node in self.nodes:
            node.resume()
        self.start()

    def stop(self, *, remove_data: bool = False) -> None:
        # Side by side: a controlled shutdown of each node waits on the others otherwise.
        for node in self.nodes:
            if node._proc is not None:
                node.resume()
        stop_processes([node._proc for node in self.nodes if node._proc is not None])
        for node in self.nodes:
            node.stop()
        if remove_data and self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def active_controller(self) -> int | None:
        """The node id of the metadata quorum's leader, once every running node agrees on it and
        it runs; None during an election (or with no node running)."""
        states = {_quorum_state(node.data_dir) for node in self.nodes if node.running}
        if len(states) != 1:
            return None
        (state,) = states
        if state is None or not self.node(state.leader).running:
            return None
        return state.leader

    def wait_for_controller(self, *, timeout_s: float = 60.0, other_than: int | None = None) -> int:
        """The active controller's node id, waited for (after a kill, the election of another)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader = self.active_controller()
            if leader is not None and leader != other_than:
                return leader
            time.sleep(0.2)
        raise DevenvError(f"no active KRaft controller (other than {other_than}) after {timeout_s:.0f} s")

    def partition_leader(self, topic: str, partition: int) -> int:
        """The node id leading `topic`'s `partition` (-1 while it has none)."""
        from rollout_devenv._cluster_probe import describe_partitions

        return describe_partitions(self.bootstrap, [topic])[(topic, partition)].leader

    def wait_in_sync(self, topics: list[str], *, timeout_s: float = 60.0) -> None:
        """Wait until every partition of `topics` has all its replicas in sync (after a restart)."""
        from rollout_devenv._cluster_probe import describe_partitions

        deadline = time.monotonic() + timeout_s
        lagging: list[str] = []
        while time.monotonic() < deadline:
            found = describe_partitions(self.bootstrap, topics)
            lagging = [f"{t}[{p}]" for (t, p), part in sorted(found.items()) if set(part.isr) != set(part.replicas)]
            if found and not lagging:
                return
            time.sleep(0.3)
        raise DevenvError(f"partitions still out of sync after {timeout_s:.0f} s: {lagging[:10]}")

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(remove_data=True)


def _distinct_ports(kept: list[BrokerPorts | None]) -> list[BrokerPorts]:
    """The ports each node wrote into its data dir earlier, else new ones no other node has."""
    taken = {port for ports in kept if ports is not None for port in (ports.broker, ports.controller)}
    chosen: list[BrokerPorts] = []
    for ports in kept:
        if ports is None:
            pair = []
            while len(pair) < 2:
                port = free_port()
                if port not in taken:
                    taken.add(port)
                    pair.append(port)
            ports = BrokerPorts(broker=pair[0], controller=pair[1])
        chosen.append(ports)
    return chosen
