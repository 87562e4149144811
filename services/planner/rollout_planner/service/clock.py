"""Engine time: wall time, optionally sped up, so a soak of days passes in seconds in demos and tests.

engine = origin + (wall - origin) * scale. The origin is kept in the store on first start, so
engine time keeps running forward, without a jump, across restarts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Engine time in epoch seconds."""

    def wall_seconds_until(self, at: float) -> float:
        """How long to wait, in real seconds, until engine time reaches `at` (0 when past)."""


class ScaledClock:
    def __init__(self, *, origin: float, scale: float = 1.0, wall: Callable[[], float] = time.time) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        self.origin = origin
        self.scale = scale
        self._wall = wall

    def now(self) -> float:
        return self.origin + (self._wall() - self.origin) * self.scale

    def wall_seconds_until(self, at: float) -> float:
        return max(0.0, (at - self.now()) / self.scale)


class ManualClock:
    """A clock tests move by hand."""

    def __init__(self, start: float) -> None:
        self.at = start

    def now(self) -> float:
        return self.at

    def wall_seconds_until(self, at: float) -> float:
        # Real time does not move this clock: a due timer is reported as due, a future one as far.
        return 0.0 if at <= self.at else 3600.0

    def advance(self, seconds: float) -> None:
        self.at += seconds
