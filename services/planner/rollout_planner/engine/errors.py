"""The engine's one error: an invariant broken, named by rule, cluster and stage.

Ordinary outcomes (a stale result, an unknown cluster, a refused command) are values; this is
raised only when the engine's own bookkeeping disagrees with itself, so the shell sets the event
aside (BUS-9) and the message says where to look. Unlike `assert`, it survives `python -O`.
"""

from __future__ import annotations


class EngineInvariantError(RuntimeError):
    """A decision found the engine's state inconsistent; the event that caused it cannot be applied."""

    def __init__(self, *, rule: str, message: str, cluster: str | None = None, stage: str | None = None) -> None:
        self.rule = rule
        self.cluster = cluster
        self.stage = stage
        where = ", ".join(p for p in (f"cluster {cluster}" if cluster else "", f"stage {stage}" if stage else "") if p)
        super().__init__(f"{rule}: {message}" + (f" ({where})" if where else ""))
