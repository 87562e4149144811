"""`python -m rollout_planner.service [--config FILE]`: run the planner until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from rollout_common import json_logging
from rollout_common.errors import InvalidInputError, PermanentError
from rollout_planner.service.checkpoint import IncompatibleSnapshotError
from rollout_planner.service.journal import JournalGapError
from rollout_planner.service.runtime import serve
from rollout_planner.service.settings import load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rollout_planner.service", description="The rollout planner (settings from ROLLOUT_* variables)."
    )
    parser.add_argument("--config", type=Path, help="YAML or JSON file of settings; overrides the environment")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
    except InvalidInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json_logging.configure(settings.log_level)
    try:
        asyncio.run(serve(settings))
    except JournalGapError as exc:
        # Restarting cannot help: the store needs an operator (the message says what to do).
        print(f"error: {exc}", file=sys.stderr)
        return 4
    except IncompatibleSnapshotError as exc:
        # A state this version cannot read is a setup problem, like bad settings: exit 2.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except PermanentError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
