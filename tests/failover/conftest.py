"""The failover tests reuse the fault-injection campaign's independent audit and process handling
(tests/chaos), which live beside its test module rather than in a package."""

from __future__ import annotations

import sys
from pathlib import Path

_CHAOS = str(Path(__file__).resolve().parents[1] / "chaos")
if _CHAOS not in sys.path:
    sys.path.append(_CHAOS)
