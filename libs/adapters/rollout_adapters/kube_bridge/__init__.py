"""rollout's own custom resources (group `rollout.dev`) and the bridge between them and Kafka.

`python -m rollout_adapters.kube_bridge run` runs the bridge; `... crds` prints the CRDs.
"""
