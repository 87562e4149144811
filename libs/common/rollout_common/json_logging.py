"""Structured logs for every service: one JSON object per line on stderr, for any log shipper.

Each line has `ts` (UTC, ISO 8601 with milliseconds), `level`, `logger`, `msg`, and every
field passed with `extra=` as a top-level key (rollout_id, topic, ...), so logs can be filtered
by them. Log settings through `connection_settings.loggable`, which masks secrets.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

# Libraries that log every reconnect attempt at ERROR; the services report outages themselves.
_NOISY = ("aiokafka",)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(level: str, *, quiet_libraries: bool = True) -> None:
    """Send the root logger's records, as JSON lines, to stderr only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    if quiet_libraries:
        for name in _NOISY:
            logging.getLogger(name).setLevel(logging.CRITICAL)


def dict_config(level: str) -> dict[str, Any]:
    """The same setup as a `logging.config.dictConfig` mapping, for frameworks (faust) that take one."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
    }


__all__ = ["JsonFormatter", "configure", "dict_config"]
