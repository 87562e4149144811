"""A probe that asks each cluster over HTTP: GET `url_template` with `{cluster}`; 2xx is ready."""

from __future__ import annotations

from urllib.parse import quote

import aiohttp

from rollout_common.errors import InvalidInputError
from rollout_common.safe_names import check_cluster_name
from rollout_health.probes.port import ProbeResult
from rollout_health.settings import HttpProbeSettings


class HttpProbe:
    name = "http"

    def __init__(self, settings: HttpProbeSettings) -> None:
        if "{cluster}" not in settings.url_template:
            raise InvalidInputError("the http probe needs http.url_template containing {cluster}")
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    def url(self, cluster: str) -> str:
        # replace, not format: a template may hold other braces; the name is quoted anyway.
        return self._settings.url_template.replace("{cluster}", quote(check_cluster_name(cluster), safe=""))

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._settings.timeout_s))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def check(self, cluster: str) -> ProbeResult:
        if self._session is None:
            raise RuntimeError("HttpProbe.start() was not called")
        try:
            url = self.url(cluster)
        except InvalidInputError as exc:
            return ProbeResult(ready=False, detail=f"rejected: {exc}")
        try:
            async with self._session.get(url, allow_redirects=False) as response:
                if 200 <= response.status < 300:
                    return ProbeResult(ready=True)
                return ProbeResult(ready=False, detail=f"HTTP {response.status}")
        except (TimeoutError, aiohttp.ClientError) as exc:
            return ProbeResult(ready=False, detail=f"unreachable: {type(exc).__name__}: {exc}"[:500])
