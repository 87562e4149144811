"""Kubernetes API access (lightkube): the Cluster API and Fleet resources we read and patch, a
client from a kubeconfig, and API errors translated into what the caller should do."""
