"""A stand-in upgrade program for the command driver in integration tests.

argv: LOG_FILE SECONDS CLUSTER TRACK VERSION. Appends "start CLUSTER" to LOG_FILE, sleeps, then
appends "done CLUSTER": the log shows how often each cluster was upgraded and finished.
"""

import sys
import time


def _log(path: str, line: str) -> None:
    # One short write with O_APPEND: lines from concurrent upgrades do not interleave.
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def main() -> None:
    log_file, seconds, cluster, track, version = sys.argv[1:6]
    _log(log_file, f"start {cluster} {track} {version}")
    time.sleep(float(seconds))
    _log(log_file, f"done {cluster} {track} {version}")


if __name__ == "__main__":
    main()
