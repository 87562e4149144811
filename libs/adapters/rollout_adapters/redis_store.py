"""The `Store` port on Redis (redis.asyncio), every key under one namespace."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import redis.asyncio as aioredis
import redis.exceptions as rex
from redis.asyncio.sentinel import Sentinel

from rollout_common.errors import InvalidInputError, PermanentError, TransientError

# Worth a retry: the server is unreachable, slow or still loading its data set. The auth and
# permission errors are ConnectionError subclasses in redis-py but will not heal by retrying.
_TRANSIENT = (rex.ConnectionError, rex.TimeoutError)
# A refused login: redis-py raises AuthenticationError for WRONGPASS and for a server that wants
# a password it was not given; a reply error starting with one of these codes means the same.
_AUTH_CODES = ("NOAUTH", "WRONGPASS")
_AUTHENTICATION = (
    "authentication failed: check the Redis username and password "
    "(ROLLOUT_REDIS_USERNAME, ROLLOUT_REDIS_PASSWORD, or the URL's)"
)
_TLS = "the TLS handshake failed: check the CA bundle (ROLLOUT_REDIS_SSL_CA_CERTS) and the server's name"
# Logged in, but the ACL user may not run this command or touch this key.
_AUTHORIZATION = "not authorized: the Redis ACL user lacks a permission this command needs"
_SCAN_BATCH = 500
T = TypeVar("T")

# Lua scripts run atomically on the server: no other client's command runs between their steps.
# Keys travel in KEYS (not built inside the script) so a cluster proxy can route them.
_DELETE_IF_EQUAL = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: lease, epoch counter. ARGV: owner, ttl in ms. Returns the new token, or false.
_TAKE_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[2]) .. '/' .. ARGV[1]
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return token
"""
_RENEW_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
# KEYS: the fence, then the keys to set, then the keys to delete. ARGV: token, how many to
# set, then their values. Checked and written in one step: a holder that lost the lease (its
# process paused past the TTL, say) can never write after the next holder took over.
_PUT_MANY_FENCED = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local puts = tonumber(ARGV[2])
for i = 1, puts do redis.call('SET', KEYS[i + 1], ARGV[i + 2]) end
for i = puts + 2, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
"""
# The MULTI/EXEC of `put_many` as one script, for when a WAIT must follow on the same connection.
_PUT_MANY = """
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i]) end
return 1
"""


class RedisStore:
    """Implements `rollout_common.ports.Store`; keys are stored as "<namespace>:<key>".

    `username`/`password` (Redis ACL, or `requirepass` with no username) override any in the
    URL; a `rediss://` URL means TLS, checked against `ssl_ca_certs` when given.
    The client connects on first use, so building a store never fails; an unreachable server
    shows up as a TransientError on the first call.

    With `sentinels` ((host, port) pairs) the store asks them for the primary of `sentinel_service`
    and follows a failover (the URL then gives only the database number and credentials): calls
    in flight when the primary dies raise TransientError, and the retry reaches the promoted one.

    With `replica_acks` above 0 every write is followed by `WAIT replica_acks replica_ack_timeout_ms`
    on the same connection, and counts as done only when that many replicas have it: Redis
    replicates asynchronously, so a write only the primary had is lost when Sentinel promotes a
    replica. A write the replicas did not confirm in time raises TransientError (it may be on the
    primary: the caller's retry must be as safe as after a lost connection).
    """

    def __init__(
        self,
        url: str,
        *,
        namespace: str = "rollout",
        username: str | None = None,
        password: str | None = None,
        ssl_ca_certs: str | None = None,
        sentinels: Sequence[tuple[str, int]] = (),
        sentinel_service: str = "rollout",
        replica_acks: int = 0,
        replica_ack_timeout_ms: int = 1000,
    ) -> None:
        self._prefix = f"{namespace}:"
        options: dict[str, Any] = {}
        if ssl_ca_certs is not None and url.startswith("rediss://"):
            options["ssl_ca_certs"] = ssl_ca_certs
        self._sentinel: Sentinel | None = None
        if sentinels:
            self._sentinel, self._redis = _through_sentinels(
                url, sentinels, service=sentinel_service, username=username, password=password, options=options
            )
        else:
            self._redis = aioredis.Redis.from_url(url, decode_responses=False, **options)
            # Explicit credentials win over any in the URL (from_url lets the URL win over arguments).
            explicit = {"username": username, "password": password}
            self._redis.connection_pool.connection_kwargs.update({k: v for k, v in explicit.items() if v is not None})
        self._replica_acks = replica_acks
        self._replica_ack_timeout_ms = replica_ack_timeout_ms
        self._closed = False

    async def get(self, key: str) -> bytes | None:
        async with self._translated("GET"):
            # decode_responses=False: values come back as bytes, as stored.
            return cast("bytes | None", await self._redis.get(self._full(key)))

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        if not keys:
            return []
        async with self._translated("MGET"):
            return cast("list[bytes | None]", await self._redis.mget([self._full(k) for k in keys]))

    async def put(self, key: str, value: bytes) -> None:
        await self._write("SET", lambda r: r.set(self._full(key), value))

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        if not items:
            return
        if self._replica_acks:
            keys = [self._full(k) for k in items]
            await self._write("put many", lambda r: _eval(r, _PUT_MANY, keys, list(items.values())))
            return
        # MULTI/EXEC: other clients see all of the writes or none of them.
        async with self._translated("MULTI/EXEC"), self._redis.pipeline(transaction=True) as pipe:
            for key, value in items.items():
                pipe.set(self._full(key), value)
            await pipe.execute()

    async def put_if_absent(self, key: str, value: bytes, *, ttl_s: int | None = None) -> bool:
        if ttl_s is not None and ttl_s <= 0:
            raise InvalidInputError(f"ttl_s must be a positive number of seconds, got {ttl_s}")
        created = await self._write("SET NX", lambda r: r.set(self._full(key), value, nx=True, ex=ttl_s))
        return bool(created)

    async def delete(self, key: str) -> None:
        await self._write("DEL", lambda r: r.delete(self._full(key)))

    async def delete_if_equal(self, key: str, value: bytes) -> bool:
        keys = [self._full(key)]
        return bool(await self._write("compare-and-delete", lambda r: _eval(r, _DELETE_IF_EQUAL, keys, [value])))

    async def take_lease(self, key: str, *, epoch_key: str, owner: str, ttl_s: float) -> bytes | None:
        ttl_ms = _ttl_ms(ttl_s)
        keys = [self._full(key), self._full(epoch_key)]
        token = await self._write("take lease", lambda r: _eval(r, _TAKE_LEASE, keys, [owner, ttl_ms]))
        return token if isinstance(token, bytes) else None

    async def renew_lease(self, key: str, token: bytes, *, ttl_s: float) -> bool:
        ttl_ms = _ttl_ms(ttl_s)
        keys = [self._full(key)]
        return bool(await self._write("renew lease", lambda r: _eval(r, _RENEW_LEASE, keys, [token, ttl_ms])))

    async def put_many_fenced(
        self, items: Mapping[str, bytes], *, fence_key: str, token: bytes, delete: Sequence[str] = ()
    ) -> bool:
        keys = [self._full(fence_key), *(self._full(k) for k in items), *(self._full(k) for k in delete)]
        args: list[bytes | int] = [token, len(items), *items.values()]
        return bool(await self._write("fenced write", lambda r: _eval(r, _PUT_MANY_FENCED, keys, args)))

    async def _write(self, command: str, write: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        """Run `write`; with `replica_acks`, on one connection followed by WAIT, and raise
        TransientError unless enough replicas confirmed it (see the class)."""
        async with self._translated(command):
            if not self._replica_acks:
                return await write(self._redis)
            # WAIT counts the writes of its own connection: both go over one pinned connection.
            async with self._redis.client() as pinned:
                result = await write(pinned)
                acked = int(await pinned.wait(self._replica_acks, self._replica_ack_timeout_ms))
        if acked < self._replica_acks:
            raise TransientError(
                f"redis {command}: {acked} of {self._replica_acks} replicas confirmed the write within "
                f"{self._replica_ack_timeout_ms} ms; a failover now would lose it, so it counts as not done"
            )
        return result

    async def keys(self, prefix: str) -> list[str]:
        pattern = _glob_escape(self._full(prefix)) + "*"
        found: set[str] = set()
        async with self._translated("SCAN"):
            # SCAN, never KEYS: KEYS blocks the server for the whole key space. SCAN may return
            # a key twice, hence the set.
            async for raw in self._redis.scan_iter(match=pattern, count=_SCAN_BATCH):
                found.add(raw.decode()[len(self._prefix) :])
        return sorted(found)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._redis.aclose()
            if self._sentinel is not None:
                for client in self._sentinel.sentinels:
                    await client.aclose()

    def _full(self, key: str) -> str:
        return self._prefix + key

    @asynccontextmanager
    async def _translated(self, command: str) -> AsyncIterator[None]:
        """Turn redis-py's exceptions into the port's: retry later, or give up."""
        if self._closed:
            raise PermanentError("the store is closed")
        try:
            yield
        except rex.ReadOnlyError as exc:
            # A primary demoted by a failover, still reached through an old connection: the retry
            # asks again where the primary is.
            raise TransientError(f"redis {command}: the server is a replica now: {exc}") from exc
        except rex.AuthenticationError as exc:
            raise PermanentError(f"redis {command}: {_AUTHENTICATION}: {exc}") from exc
        except (rex.AuthorizationError, rex.NoPermissionError) as exc:
            raise PermanentError(f"redis {command}: {_AUTHORIZATION}: {exc}") from exc
        except rex.ResponseError as exc:
            if str(exc).startswith(_AUTH_CODES):
                raise PermanentError(f"redis {command}: {_AUTHENTICATION}: {exc}") from exc
            raise PermanentError(f"redis {command}: {exc}") from exc
        except _TRANSIENT as exc:
            # A certificate that does not check out is a ConnectionError too; it stays so.
            if isinstance(exc.__context__, ssl.SSLError):
                raise PermanentError(f"redis {command}: {_TLS}: {exc}") from exc
            raise TransientError(f"redis {command}: {exc}") from exc
        except rex.RedisError as exc:
            raise PermanentError(f"redis {command}: {exc}") from exc


async def _eval(client: aioredis.Redis, script: str, keys: Sequence[str], args: Sequence[bytes | int | str]) -> object:
    # EVAL with the source each time: no script cache to lose on a server restart (NOSCRIPT).
    return await client.eval(script, len(keys), *keys, *args)


def _through_sentinels(
    url: str,
    sentinels: Sequence[tuple[str, int]],
    *,
    service: str,
    username: str | None,
    password: str | None,
    options: dict[str, Any],
) -> tuple[Sentinel, aioredis.Redis]:
    """A client of `service`'s primary, as the Sentinels name it now; the URL's database number and
    credentials (explicit ones win) and TLS go to the data connections, not to the Sentinels."""
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0)
    credentials = {"username": username or parts.username, "password": password or parts.password}
    data_options: dict[str, Any] = {k: v for k, v in credentials.items() if v is not None} | options
    if parts.scheme == "rediss":
        data_options["ssl"] = True
    sentinel = Sentinel(list(sentinels))  # type: ignore[no-untyped-call]
    return sentinel, sentinel.master_for(service, db=db, decode_responses=False, **data_options)


def _ttl_ms(ttl_s: float) -> int:
    if ttl_s <= 0:
        raise InvalidInputError(f"ttl_s must be a positive number of seconds, got {ttl_s}")
    return max(1, round(ttl_s * 1000))


def _glob_escape(text: str) -> str:
    """Escape the characters SCAN MATCH reads as a pattern, so a prefix matches literally."""
    return "".join("\\" + char if char in "*?[]\\" else char for char in text)
