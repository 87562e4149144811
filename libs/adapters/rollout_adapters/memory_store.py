"""A dict-backed `Store` with Redis's rules: TTLs on `put_if_absent`, atomic `put_many`."""

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
