"""A lightkube client from a kubeconfig, and API errors sorted by what the caller should do."""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx
from lightkube import AsyncClient, KubeConfig
from lightkube.core.exceptions import ApiError, ConfigError

from rollout_common.errors import PermanentError, TransientError


class KubeAccessDeniedError(PermanentError):
    """RBAC refused the request (403) or the credentials were not accepted (401)."""


class KubeObjectMissingError(PermanentError):
    """The object (or its kind: a CRD not installed) does not exist (404)."""


class KubeConflictError(PermanentError):
    """Server-side apply found fields owned by another manager (409), or a stale update."""


class KubeInvalidError(PermanentError):
    """The API server refused the object as invalid (422) or the request as malformed (400)."""


def async_client(*, kubeconfig: Path | None, field_manager: str, context: str | None = None) -> AsyncClient:
    """A client for `kubeconfig` (None: $KUBECONFIG, ~/.kube/config or the in-cluster account)."""
    try:
        config = KubeConfig.from_file(str(kubeconfig)) if kubeconfig else KubeConfig.from_env()
        single = config.get(context_name=context)
    except (ConfigError, OSError) as exc:
        raise PermanentError(f"cannot load the kubeconfig {kubeconfig or '(from the environment)'}: {exc}") from exc
    if single is None:
        raise PermanentError(f"the kubeconfig {kubeconfig or '(from the environment)'} has no context {context!r}")
    return AsyncClient(single, field_manager=field_manager)


def translate(exc: Exception, *, doing: str) -> Exception:
    """The error a caller acts on, for a failure while `doing` something (a phrase naming the object)."""
    if isinstance(exc, ApiError):
        code = exc.status.code or 0
        reason = exc.status.message or exc.status.reason or "no message"
        if code in (401, 403):
            return KubeAccessDeniedError(f"{doing}: access denied ({code}): {reason}")
        if code == 404:
            return KubeObjectMissingError(f"{doing}: not found: {reason}")
        if code == 409:
            return KubeConflictError(f"{doing}: conflict: {reason}")
        if code in (400, 422):
            return KubeInvalidError(f"{doing}: refused as invalid ({code}): {reason}")
        return TransientError(f"{doing}: API server answered {code}: {reason}")
    if isinstance(exc, (httpx.HTTPError, OSError)):
        return TransientError(f"{doing}: API server unreachable: {exc}")
    return exc
