#!/usr/bin/env bash
# The command driver's recipe for AKS: upgrade-cluster CLUSTER TRACK VERSION with the az CLI.
#   controlPlane: az aks upgrade --control-plane-only (az waits for it)
#   nodes:        every node pool, one after the other, with az aks nodepool upgrade
# Set ROLLOUT_AKS_RESOURCE_GROUP.
set -euo pipefail
cluster=$1 track=$2 version=$3
group=${ROLLOUT_AKS_RESOURCE_GROUP:?set ROLLOUT_AKS_RESOURCE_GROUP to the clusters resource group}
# Whatever already runs the version is left alone: a retried or redelivered upgrade does nothing.
case "$track" in
  controlPlane)
    current=$(az aks show --resource-group "$group" --name "$cluster" --query kubernetesVersion --output tsv)
    if [ "$current" != "$version" ]; then
      az aks upgrade --resource-group "$group" --name "$cluster" --kubernetes-version "$version" --control-plane-only --yes
    fi
    ;;
  nodes)
    pools=$(az aks nodepool list --resource-group "$group" --cluster-name "$cluster" --query '[].name' --output tsv)
    [ -n "$pools" ] || { echo "cluster $cluster has no node pools" >&2; exit 1; }
    for pool in $pools; do
      current=$(az aks nodepool show --resource-group "$group" --cluster-name "$cluster" --name "$pool" \
        --query orchestratorVersion --output tsv)
      if [ "$current" != "$version" ]; then
        az aks nodepool upgrade --resource-group "$group" --cluster-name "$cluster" --name "$pool" \
          --kubernetes-version "$version"
      fi
    done
    ;;
  *) echo "unknown track $track" >&2; exit 2 ;;
esac
