"""Kubeconfigs for service accounts with exactly the rules a test gives them (RBAC), with tokens
from the TokenRequest API: works on the local apiserver and on any cluster `KUBECONFIG` names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from lightkube import AsyncClient
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.models.rbac_v1 import PolicyRule, RoleRef, Subject
from lightkube.resources.core_v1 import ServiceAccount, ServiceAccountToken
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding


async def kubeconfig_with_rules(
    kube: AsyncClient,
    *,
    admin_kubeconfig: Path,
    namespace: str,
    name: str,
    rules: Sequence[Mapping[str, Any]],
    folder: Path,
) -> Path:
    """A kubeconfig for service account `name`, bound in `namespace` to a Role of `rules`."""
    meta = ObjectMeta(name=name, namespace=namespace)
    await kube.create(ServiceAccount(metadata=meta))
    await kube.create(Role(metadata=meta, rules=[PolicyRule(**rule) for rule in rules]))
    await kube.create(
        RoleBinding(
            metadata=meta,
            roleRef=RoleRef(apiGroup="rbac.authorization.k8s.io", kind="Role", name=name),
            subjects=[Subject(kind="ServiceAccount", name=name, namespace=namespace)],
        )
    )
    request = ServiceAccountToken(metadata=meta, spec=TokenRequestSpec(audiences=[], expirationSeconds=3600))
    answer = await kube.create(request, name, namespace=namespace)
    assert answer.status is not None
    return _write(
        admin_kubeconfig, name=name, token=answer.status.token, path=folder / f"kubeconfig-{namespace}-{name}"
    )


def _write(admin_kubeconfig: Path, *, name: str, token: str, path: Path) -> Path:
    config = yaml.safe_load(admin_kubeconfig.read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"] if c["name"] == context["context"]["cluster"])
    own = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(own))
    return path
