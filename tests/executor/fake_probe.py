"""A stand-in probe program for the command driver: what `fake_upgrade.py` left a cluster running.

argv: LOG_FILE CLUSTER TRACK. Prints the version of the last "done CLUSTER TRACK VERSION" line of
LOG_FILE; prints nothing (cannot tell) when there is none.
"""

import sys
from pathlib import Path


def main() -> None:
    log_file, cluster, track = sys.argv[1:4]
    path = Path(log_file)
    running = None
    for line in (path.read_text(encoding="utf-8") if path.exists() else "").splitlines():
        parts = line.split()
        if parts[:3] == ["done", cluster, track] and len(parts) == 4:
            running = parts[3]
    if running is not None:
        print(running)


if __name__ == "__main__":
    main()
