"""The dashboard on a thread of its own, for a process whose main thread is busy (`rollout demo`).

The thread runs its own event loop with the aiohttp app; the main thread publishes snapshots to
the `Feed` the app reads, so the two share nothing else.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

_START_TIMEOUT_S = 10.0


class ThreadSite:
    """Serve `app` on host:port from a daemon thread; `start` returns the bound port."""

    def __init__(self, app: web.Application, *, host: str, port: int) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._runner = web.AppRunner(app, access_log=None)
        self._thread = threading.Thread(target=self._loop.run_forever, name="dashboard", daemon=True)
        self.port: int | None = None

    def start(self) -> int:
        """Bind and serve; raises OSError when the address is taken."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        try:
            self.port = future.result(_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self.port

    async def _listen(self) -> int:
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        return int(self._runner.addresses[0][1])

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(_START_TIMEOUT_S)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_START_TIMEOUT_S)
        self._loop.close()


def url_of(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


__all__ = ["ThreadSite", "url_of"]
