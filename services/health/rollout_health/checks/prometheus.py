"""The instant-query port over Prometheus's HTTP API (`GET /api/v1/query`), with aiohttp.

Bounded: the whole request (connect included) within `timeout_s`, which is also sent as the
query's own `timeout`, so Prometheus gives up its evaluation too. Authenticated by a bearer token
or basic auth from the settings. Whatever goes wrong (unreachable, refused, a query error, a body
that is no Prometheus answer) comes back as a `QueryAnswer` with the problem, never an exception.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Any, Self

import aiohttp

from rollout_health.checks.port import QueryAnswer
from rollout_health.settings import ChecksSettings

# An answer bigger than this is no first sample of a check's query worth reading.
MAX_BODY_BYTES = 1_000_000


class PrometheusQuery:
    def __init__(self, settings: ChecksSettings) -> None:
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=self._settings.timeout_s), headers=self._headers()
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _headers(self) -> dict[str, str]:
        settings = self._settings
        if settings.bearer_token is not None:
            return {"Authorization": f"Bearer {settings.bearer_token.get_secret_value()}"}
        if settings.basic_auth_username is not None and settings.basic_auth_password is not None:
            password = settings.basic_auth_password.get_secret_value()
            return {"Authorization": aiohttp.encode_basic_auth(settings.basic_auth_username, password)}
        return {}

    async def ask(self, query: str, *, base_url: str) -> QueryAnswer:
        if self._session is None:
            raise RuntimeError("PrometheusQuery.start() was not called")
        url = base_url.rstrip("/") + "/api/v1/query"
        params = {"query": query, "timeout": f"{self._settings.timeout_s:g}s"}
        try:
            async with self._session.get(url, params=params, allow_redirects=False) as response:
                return parse_answer(response.status, await _bounded_body(response))
        except TimeoutError:
            return QueryAnswer(problem=f"no answer from {base_url} within {self._settings.timeout_s:g} s")
        except aiohttp.ClientError as exc:
            return QueryAnswer(problem=f"{base_url} unreachable: {type(exc).__name__}: {exc}")


async def _bounded_body(response: aiohttp.ClientResponse) -> bytes:
    """The body up to one byte past the bound (`read(n)` returns one chunk at most, so it loops)."""
    body = bytearray()
    while len(body) <= MAX_BODY_BYTES:
        chunk = await response.content.read(MAX_BODY_BYTES + 1 - len(body))
        if not chunk:
            break
        body += chunk
    return bytes(body)


def parse_answer(status: int, body: bytes) -> QueryAnswer:
    """The first sample of a Prometheus answer, or what is wrong with it."""
    if len(body) > MAX_BODY_BYTES:
        return QueryAnswer(problem=f"HTTP {status}: an answer above {MAX_BODY_BYTES} bytes")
    try:
        decoded: Any = json.loads(body)
    except ValueError:
        text = body[:200].decode(errors="replace").strip()
        return QueryAnswer(problem=f"HTTP {status}, not a Prometheus answer: {text!r}")
    if not isinstance(decoded, dict):
        return QueryAnswer(problem=f"HTTP {status}, not a Prometheus answer")
    if decoded.get("status") != "success":
        kind, error = decoded.get("errorType", "error"), decoded.get("error", "no reason given")
        return QueryAnswer(problem=f"query error (HTTP {status}, {kind}): {error}")
    return _first_sample(decoded.get("data"))


def _first_sample(data: Any) -> QueryAnswer:
    """A vector's first sample or a scalar; a range vector or a string is no value to judge."""
    kind = data.get("resultType") if isinstance(data, dict) else None
    result = data.get("result") if isinstance(data, dict) else None
    if kind == "vector" and isinstance(result, list):
        if not result:
            return QueryAnswer()
        first = result[0]
        return _number(first.get("value") if isinstance(first, dict) else None)
    if kind == "scalar":
        return _number(result)
    return QueryAnswer(problem=f"the query returns a {kind or 'malformed result'}, not an instant vector or a scalar")


def _number(pair: Any) -> QueryAnswer:
    """`[time, "value"]`; Prometheus writes NaN and infinities as "NaN", "+Inf", "-Inf"."""
    if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[1], str)):
        return QueryAnswer(problem=f"a sample that is no [time, value] pair: {str(pair)[:100]}")
    try:
        return QueryAnswer(value=float(pair[1]))
    except ValueError:
        return QueryAnswer(problem=f"a sample value that is no number: {pair[1][:100]!r}")
