"""A stand-in upgrade program for the command driver in integration tests.

argv: LOG_FILE SECONDS [--then-hang] CLUSTER TRACK VERSION. Appends "start CLUSTER TRACK VERSION"
to LOG_FILE, sleeps, then appends "done CLUSTER TRACK VERSION": the log shows how often each
cluster was upgraded and how often an upgrade took effect. With `--then-hang` it does not exit
after "done" (an executor killed then has finished the upgrade and recorded nothing);
`fake_probe.py` reads the running version back from the same log.
"""

import sys
import time


def _log(path: str, line: str) -> None:
    # One short write with O_APPEND: lines from concurrent upgrades do not interleave.
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def main() -> None:
    log_file, seconds, *flags = sys.argv[1:-3]
    cluster, track, version = sys.argv[-3:]
    _log(log_file, f"start {cluster} {track} {version}")
    time.sleep(float(seconds))
    _log(log_file, f"done {cluster} {track} {version}")
    while "--then-hang" in flags:
        time.sleep(60)


if __name__ == "__main__":
    main()
