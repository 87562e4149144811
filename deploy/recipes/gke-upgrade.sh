#!/usr/bin/env bash
# The command driver's recipe for GKE: upgrade-cluster CLUSTER TRACK VERSION with gcloud.
#   controlPlane: gcloud container clusters upgrade CLUSTER --master --cluster-version VERSION
#   nodes:        every node pool, one after the other, to VERSION (gcloud waits for each)
# Set ROLLOUT_GKE_LOCATION (region or zone) and, if not the default, ROLLOUT_GKE_PROJECT.
set -euo pipefail
cluster=$1 track=$2 version=$3
where=(--location "${ROLLOUT_GKE_LOCATION:?set ROLLOUT_GKE_LOCATION to the cluster region or zone}")
if [ -n "${ROLLOUT_GKE_PROJECT:-}" ]; then where+=(--project "$ROLLOUT_GKE_PROJECT"); fi
# Whatever already runs the version is left alone: a retried or redelivered upgrade does nothing.
case "$track" in
  controlPlane)
    current=$(gcloud container clusters describe "$cluster" "${where[@]}" --format 'value(currentMasterVersion)')
    if [ "$current" != "$version" ]; then
      gcloud container clusters upgrade "$cluster" "${where[@]}" --master --cluster-version "$version" --quiet
    fi
    ;;
  nodes)
    pools=$(gcloud container node-pools list --cluster "$cluster" "${where[@]}" --format 'value(name)')
    [ -n "$pools" ] || { echo "cluster $cluster has no node pools" >&2; exit 1; }
    for pool in $pools; do
      current=$(gcloud container node-pools describe "$pool" --cluster "$cluster" "${where[@]}" --format 'value(version)')
      if [ "$current" != "$version" ]; then
        gcloud container clusters upgrade "$cluster" "${where[@]}" --node-pool "$pool" --cluster-version "$version" --quiet
      fi
    done
    ;;
  *) echo "unknown track $track" >&2; exit 2 ;;
esac
