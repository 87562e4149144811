"""The dashboard's routes (aiohttp): the page, its live fragment, the JSON API and two static files.

Safe by default: every route is GET (anything else gets 405), every answer carries a strict
Content-Security-Policy (scripts and styles from this origin only, nothing inline), and when a
token or a user and password are configured every route asks for them.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Awaitable, Callable
from importlib import resources

from aiohttp import web
from aiohttp.typedefs import Middleware
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from rollout_adapters.web_dashboard.feed import ClusterQuery, Snapshot, page_of
from rollout_adapters.web_dashboard.render import live_sections, page

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_READ_METHODS = ("GET", "HEAD")
_STATIC = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class DashboardAccess(BaseModel):
    """Who may read the dashboard: anyone who reaches it, or whoever shows the token or the user's password."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: SecretStr | None = None
    username: str | None = None
    password: SecretStr | None = None

    @property
    def open(self) -> bool:
        return self.token is None and self.password is None

    def allows(self, authorization: str) -> bool:
        scheme, _, credentials = authorization.partition(" ")
        scheme = scheme.lower()
        if scheme == "bearer" and self.token is not None:
            return hmac.compare_digest(credentials.strip().encode(), self.token.get_secret_value().encode())
        if scheme == "basic" and self.password is not None:
            try:
                user, _, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return False
            user_ok = hmac.compare_digest(user.encode(), (self.username or "").encode())
            return user_ok & hmac.compare_digest(password.encode(), self.password.get_secret_value().encode())
        return False

    def challenge(self) -> str:
        return 'Basic realm="rollout dashboard"' if self.password is not None else 'Bearer realm="rollout dashboard"'


def dashboard_app(
    current: Callable[[], Snapshot], *, title: str, access: DashboardAccess | None = None
) -> web.Application:
    """The dashboard over whatever `current` returns (the latest snapshot; cheap, called per request)."""
    routes = _Routes(current, title=title)
    app = web.Application(middlewares=[_guard(access or DashboardAccess())])
    app.router.add_get("/", routes.index)
    app.router.add_get("/api/status", routes.status)
    app.router.add_get("/api/clusters", routes.clusters)
    app.router.add_get("/fragments/live", routes.live)
    app.router.add_get("/static/{name}", routes.static)
    return app


def _guard(access: DashboardAccess) -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in _READ_METHODS:
            response: web.StreamResponse = web.Response(
                status=405, text="read-only: only GET and HEAD\n", headers={"Allow": ", ".join(_READ_METHODS)}
            )
        elif not access.open and not access.allows(request.headers.get("Authorization", "")):
            response = web.Response(status=401, text="unauthorized\n", headers={"WWW-Authenticate": access.challenge()})
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = web.Response(status=exc.status, text=f"{exc.reason}\n")
        response.headers.update(_SECURITY_HEADERS)
        return response

    return guard


class _Routes:
    def __init__(self, current: Callable[[], Snapshot], *, title: str) -> None:
        self._current = current
        self._title = title
        # the latest snapshot's JSON, encoded once however many pages poll it
        self._encoded: tuple[str, bytes] = ("", b"")

    async def index(self, _: web.Request) -> web.Response:
        html = page(self._current(), title=self._title)
        return web.Response(text=html, content_type="text/html", headers={"Cache-Control": "no-store"})

    async def status(self, request: web.Request) -> web.Response:
        snapshot = self._current()
        if _unchanged(request, snapshot):
            return _not_modified(snapshot)
        if self._encoded[0] != snapshot.version:
            self._encoded = (snapshot.version, json.dumps(snapshot.doc, default=str).encode())
        return web.Response(body=self._encoded[1], content_type="application/json", headers=_etag_headers(snapshot))

    async def live(self, request: web.Request) -> web.Response:
        snapshot = self._current()
        if _unchanged(request, snapshot):
            return _not_modified(snapshot)
        return web.Response(text=live_sections(snapshot), content_type="text/html", headers=_etag_headers(snapshot))

    async def clusters(self, request: web.Request) -> web.Response:
        try:
            query = ClusterQuery.model_validate(dict(request.query))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            return web.json_response({"error": problems}, status=400)
        snapshot = self._current()
        body = page_of(snapshot.rows, query) | {"version": snapshot.version}
        return web.json_response(body, headers={"Cache-Control": "no-store"})

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        text = resources.files("rollout_adapters.web_dashboard").joinpath("static", name).read_text(encoding="utf-8")
        return web.Response(text=text, content_type=_STATIC[name], headers={"Cache-Control": "no-cache"})


def _unchanged(request: web.Request, snapshot: Snapshot) -> bool:
    return request.headers.get("If-None-Match") == snapshot.etag


def _etag_headers(snapshot: Snapshot) -> dict[str, str]:
    return {"ETag": snapshot.etag, "Cache-Control": "no-cache"}


def _not_modified(snapshot: Snapshot) -> web.Response:
    return web.Response(status=304, headers=_etag_headers(snapshot))


__all__ = ["CSP", "DashboardAccess", "dashboard_app"]
