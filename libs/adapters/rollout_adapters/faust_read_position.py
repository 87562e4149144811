"""Where faust's consumer stands on a partition, for a worker that judges how far it has read.

Neither answer is in faust's consumer interface (`ConsumerT`): the offset faust committed last is
the one it started reading an assigned partition from, and the end of the partition comes from
aiokafka's last fetch. Both are read here so no service reaches into faust's attributes itself.
"""

from __future__ import annotations

from typing import Any

from faust.types import TP


def committed_offset(consumer: Any, tp: TP) -> int:
    """The next offset faust committed for `tp`, where its reading began; 0 when none is known."""
    committed: dict[TP, int | None] = consumer._committed_offset
    return committed.get(tp) or 0


def highwater(consumer: Any, tp: TP) -> int | None:
    """The partition's end offset at its last fetch; None when not known (not fetched yet, or no
    longer assigned: aiokafka's consumer thread learns of a rebalance before the agent's signals,
    and asserts the partition is assigned)."""
    try:
        end: int | None = consumer.highwater(tp)
    except Exception:  # whatever the consumer raises here, the answer is "not known"
        return None
    return end


__all__ = ["committed_offset", "highwater"]
