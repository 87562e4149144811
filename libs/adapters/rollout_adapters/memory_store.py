"""A dict-backed `Store` with Redis's rules: TTLs, atomic `put_many`, leases and fenced writes.

One process, no awaits inside an operation: each method is as atomic as Redis's Lua scripts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from rollout_common.errors import InvalidInputError, PermanentError

Clock = Callable[[], float]


class MemoryStore:
    """Implements `rollout_common.ports.Store` in one process.

    `clock` returns seconds and only drives expiry: tests pass a fake one to expire keys
    without sleeping.
    """

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, bytes] = {}
        self._expires_at: dict[str, float] = {}
        self._closed = False

    async def get(self, key: str) -> bytes | None:
        self._check_open()
        return self._live(key)

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        self._check_open()
        return [self._live(key) for key in keys]

    async def put(self, key: str, value: bytes) -> None:
        await self.put_many({key: value})

    async def put_many(self, items: Mapping[str, bytes]) -> None:
        self._check_open()
        for key, value in items.items():
            self._values[key] = value
            # A plain write clears an earlier TTL, as Redis's SET does.
            self._expires_at.pop(key, None)

    async def put_if_absent(self, key: str, value: bytes, *, ttl_s: int | None = None) -> bool:
        self._check_open()
        if ttl_s is not None and ttl_s <= 0:
            raise InvalidInputError(f"ttl_s must be a positive number of seconds, got {ttl_s}")
        if self._live(key) is not None:
            return False
        self._values[key] = value
        if ttl_s is not None:
            self._expires_at[key] = self._clock() + ttl_s
        return True

    async def delete(self, key: str) -> None:
        self._check_open()
        self._values.pop(key, None)
        self._expires_at.pop(key, None)

    async def delete_if_equal(self, key: str, value: bytes) -> bool:
        self._check_open()
        if self._live(key) != value:
            return False
        await self.delete(key)
        return True

    async def take_lease(self, key: str, *, epoch_key: str, owner: str, ttl_s: float) -> bytes | None:
        self._check_open()
        _check_ttl(ttl_s)
        if self._live(key) is not None:
            return None
        epoch = int(self._live(epoch_key) or b"0") + 1
        self._values[epoch_key] = str(epoch).encode()
        token = f"{epoch}/{owner}".encode()
        self._values[key] = token
        self._expires_at[key] = self._clock() + ttl_s
        return token

    async def renew_lease(self, key: str, token: bytes, *, ttl_s: float) -> bool:
        self._check_open()
        _check_ttl(ttl_s)
        if self._live(key) != token:
            return False
        self._expires_at[key] = self._clock() + ttl_s
        return True

    async def put_many_fenced(
        self, items: Mapping[str, bytes], *, fence_key: str, token: bytes, delete: Sequence[str] = ()
    ) -> bool:
        self._check_open()
        if self._live(fence_key) != token:
            return False
        await self.put_many(items)
        for key in delete:
            await self.delete(key)
        return True

    async def keys(self, prefix: str) -> list[str]:
        self._check_open()
        return sorted(key for key in list(self._values) if key.startswith(prefix) and self._live(key) is not None)

    async def close(self) -> None:
        self._closed = True

    def _live(self, key: str) -> bytes | None:
        """The value unless it has expired; an expired key is dropped on the way."""
        expires_at = self._expires_at.get(key)
        if expires_at is not None and self._clock() >= expires_at:
            del self._values[key]
            del self._expires_at[key]
        return self._values.get(key)

    def _check_open(self) -> None:
        if self._closed:
            raise PermanentError("the store is closed")


def _check_ttl(ttl_s: float) -> None:
    if ttl_s <= 0:
        raise InvalidInputError(f"ttl_s must be a positive number of seconds, got {ttl_s}")
