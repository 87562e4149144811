"""aiokafka's producer under a faust app's producer, for sends that skip faust's own send path."""

from __future__ import annotations

from typing import Any


def client_producer(app: Any) -> Any:
    """aiokafka's producer under faust's, once faust started it; None before (and in a test that
    drives an agent in process)."""
    return getattr(app.producer, "_producer", None)


__all__ = ["client_producer"]
