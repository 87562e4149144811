"""`/healthz`, `/readyz` and `/metrics` over a minimal HTTP/1.1 server on asyncio streams.

prometheus-client's own server runs in a thread and knows no health routes; these three
read-only routes need nothing more than this.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST

_MAX_REQUEST_LINE = 8192


class ProbeServer:
    def __init__(self, *, healthy: Callable[[], bool], ready: Callable[[], bool], metrics: Callable[[], bytes]) -> None:
        self._routes: dict[str, Callable[[], tuple[int, str, bytes]]] = {
            "/healthz": lambda: _probe(healthy()),
            "/readyz": lambda: _probe(ready()),
            "/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics()),
        }
        self._server: asyncio.Server | None = None

    async def start(self, *, host: str, port: int) -> int:
        """Listen; returns the bound port (useful when asked for port 0 by tests)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass  # headers are not needed
            parts = line[:_MAX_REQUEST_LINE].decode(errors="replace").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            route = self._routes.get(path)
            status, content_type, body = route() if route else (404, "text/plain", b"not found\n")
            reason = {200: "OK", 404: "Not Found", 503: "Service Unavailable"}[status]
            head = (
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _probe(ok: bool) -> tuple[int, str, bytes]:
    return (200, "text/plain", b"ok\n") if ok else (503, "text/plain", b"not ready\n")
