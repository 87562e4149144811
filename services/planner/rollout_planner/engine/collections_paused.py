"""Pausing the cyclic garbage collector while a whole fleet's state is built.

Building a state (`new_state`, loading a snapshot) makes a million objects that all stay alive: a
collection in the middle frees nothing, yet each full one walks every object made so far, which
made a million-cluster build superlinear. Results never depend on it; reference counting still
frees everything as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collections_paused() -> Iterator[None]:
    """No cyclic collection inside; the collector's setting is as it was afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
