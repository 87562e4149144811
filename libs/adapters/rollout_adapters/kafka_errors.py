"""Aiokafka's and the broker's errors as the `Bus` port's: retry later, or give up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiokafka.errors as kerr  # type: ignore[import-untyped]

from rollout_common.errors import PermanentError, RolloutError, TransientError, UnknownTopicError

# Errors that no retry can fix, even those aiokafka flags as retriable.
_PERMANENT = (
    kerr.TopicAuthorizationFailedError,
    kerr.GroupAuthorizationFailedError,
    kerr.ClusterAuthorizationFailedError,
    kerr.AuthenticationFailedError,
    kerr.SaslAuthenticationFailed,
    kerr.MessageSizeTooLargeError,
    kerr.RecordTooLargeError,
    kerr.RecordListTooLargeError,
    kerr.InvalidConfigurationError,
    kerr.InvalidTopicError,
    kerr.InvalidPartitionsError,
    kerr.InvalidReplicationFactorError,
    kerr.PolicyViolationError,
    kerr.KafkaConfigurationError,
    kerr.UnsupportedVersionError,
)
# Retry later: the cluster is unreachable, electing a leader or rebalancing the group. Errors
# aiokafka itself marks `retriable` count too.
_TRANSIENT = (
    kerr.KafkaConnectionError,
    kerr.KafkaTimeoutError,
    kerr.KafkaUnavailableError,
    kerr.RequestTimedOutError,
    kerr.NotLeaderForPartitionError,
    kerr.LeaderNotAvailableError,
    kerr.GroupCoordinatorNotAvailableError,
    kerr.NotCoordinatorForGroupError,
    kerr.RebalanceInProgressError,
    kerr.CommitFailedError,
    kerr.IllegalGenerationError,
    kerr.UnknownMemberIdError,
    OSError,
    TimeoutError,
)


def translate(exc: BaseException, doing: str) -> RolloutError:
    """The port's error for a driver error met while `doing` something."""
    message = f"kafka: {doing}: {type(exc).__name__}: {exc}"
    if isinstance(exc, kerr.UnknownTopicOrPartitionError):
        return UnknownTopicError(message)
    if isinstance(exc, _PERMANENT):
        return PermanentError(message)
    if isinstance(exc, _TRANSIENT) or getattr(exc, "retriable", False):
        return TransientError(message)
    return PermanentError(message)


@contextmanager
def _translated(doing: str, *, topics_checked: bool = False) -> Iterator[None]:
    """`topics_checked`: the topics were seen to exist; an unknown topic now is a broker that is
    stopping or restarting (it answers so while it loads), worth a retry, not an exit."""
    try:
        yield
    except kerr.UnknownTopicOrPartitionError as exc:
        if topics_checked:
            raise TransientError(f"kafka: {doing}: {type(exc).__name__}: {exc}") from exc
        raise translate(exc, doing) from exc
    except (kerr.KafkaError, kerr.ConsumerStoppedError, kerr.IllegalOperation, OSError, TimeoutError) as exc:
        raise translate(exc, doing) from exc


__all__ = ["translate"]
