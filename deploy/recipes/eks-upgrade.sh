#!/usr/bin/env bash
# The command driver's recipe for EKS: upgrade-cluster CLUSTER TRACK VERSION with the aws CLI.
# EKS takes MAJOR.MINOR only (1.31.2 -> 1.31) and upgrades asynchronously, so each update is
# followed by the matching `aws eks wait`.
#   controlPlane: aws eks update-cluster-version, then wait cluster-active
#   nodes:        every managed node group: update-nodegroup-version, then wait nodegroup-active
# The region comes from AWS_REGION (or the profile), as for any aws command.
set -euo pipefail
cluster=$1 track=$2 version=$3
minor=$(echo "$version" | cut -d. -f1-2)
# Whatever already runs the version is left alone: a retried or redelivered upgrade does nothing.
case "$track" in
  controlPlane)
    current=$(aws eks describe-cluster --name "$cluster" --query cluster.version --output text)
    if [ "$current" != "$minor" ]; then
      aws eks update-cluster-version --name "$cluster" --kubernetes-version "$minor"
      aws eks wait cluster-active --name "$cluster"
    fi
    ;;
  nodes)
    groups=$(aws eks list-nodegroups --cluster-name "$cluster" --query 'nodegroups[]' --output text)
    [ -n "$groups" ] || { echo "cluster $cluster has no managed node groups" >&2; exit 1; }
    for group in $groups; do
      current=$(aws eks describe-nodegroup --cluster-name "$cluster" --nodegroup-name "$group" \
        --query nodegroup.version --output text)
      if [ "$current" != "$minor" ]; then
        aws eks update-nodegroup-version --cluster-name "$cluster" --nodegroup-name "$group" --kubernetes-version "$minor"
        aws eks wait nodegroup-active --cluster-name "$cluster" --nodegroup-name "$group"
      fi
    done
    ;;
  *) echo "unknown track $track" >&2; exit 2 ;;
esac
