"""Errors sorted by what the caller should do about them.

Adapters translate driver exceptions into these (`raise ... from exc`); the engine never raises
them: domain outcomes are values.
"""


class RolloutError(Exception):
    """Base of every error the project raises on purpose."""


class TransientError(RolloutError):
    """Retry later: the broker or store is unreachable, overloaded or rebalancing."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentError(RolloutError):
    """Give up (or dead-letter): retrying the same call cannot succeed."""


class UnknownTopicError(PermanentError):
    """Publishing to or consuming from a topic that was never created."""


class InvalidInputError(PermanentError):
    """A message or file failed validation; the text names the field and the rule."""
