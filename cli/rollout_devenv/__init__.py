"""Local infrastructure without Docker: a real Apache Kafka broker (or a three-node cluster), a
real Redis server (or a primary, a replica and three Sentinels), a real Prometheus server, and
real Kubernetes API servers on etcd.

Used by the test fixtures (tests/conftest.py) and by people: `python -m rollout_devenv --help`.
"""

from rollout_devenv._proc import DevenvError, free_port, stop_processes
from rollout_devenv.kafka import KafkaBroker, fetch_kafka_jars, kafka_version
from rollout_devenv.kafka_cluster import KafkaCluster
from rollout_devenv.kube import KubeApiServer, KubeStack, KubeUser, build_kube_apiserver
from rollout_devenv.prometheus import PrometheusServer
from rollout_devenv.redis import RedisServer
from rollout_devenv.redis_sentinel import RedisSentinelGroup

__all__ = [
    "DevenvError",
    "KafkaBroker",
    "KafkaCluster",
    "KubeApiServer",
    "KubeStack",
    "KubeUser",
    "PrometheusServer",
    "RedisSentinelGroup",
    "RedisServer",
    "build_kube_apiserver",
    "fetch_kafka_jars",
    "free_port",
    "kafka_version",
    "stop_processes",
]
