"""A faust codec that writes and reads JSON with msgspec, for the monitor's table.

faust's own `json` codec goes through the standard library's encoder with faust's wrappers around
it: about 6 µs of CPU for a table row and its key, on every row written (each first heartbeat, and
every checkpoint of a cluster at rest). msgspec writes the same JSON (compact, the same numbers) in
a tenth of that, and reads what either wrote: rows in a changelog written before stay readable.
"""

from __future__ import annotations

from typing import Any

import msgspec
from faust.serializers.codecs import Codec

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


class MsgspecJson(Codec):
    def _dumps(self, s: Any) -> bytes:
        return _ENCODER.encode(s)

    def _loads(self, s: bytes) -> Any:
        return _DECODER.decode(s)


__all__ = ["MsgspecJson"]
