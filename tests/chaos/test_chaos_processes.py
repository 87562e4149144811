"""The chaos run's process control: a kill's recorded time comes after everything the killed
process did. The audit explains an upgrade run twice by a kill of its first executor after that
run started (`chaos_audit._count_reruns`); a time taken before the signal landed once left a
run the dying executor started in between unexplained (seed 8, on a loaded machine)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from chaos_processes import ChaosProcesses

# Writes the wall time, flushed, as fast as it can, until it is killed.
STAMPER = "import sys, time\nwhile True:\n    print(repr(time.time()), flush=True)\n"


def test_everything_a_killed_process_did_comes_before_its_recorded_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def late_killpg(pid: int, sig: int) -> None:
        time.sleep(0.05)  # the chaos run's thread descheduled between its decision and the signal
        killpg(pid, sig)

    killpg = os.killpg
    monkeypatch.setattr(os, "killpg", late_killpg)
    (tmp_path / "stamper.py").write_text(STAMPER)
    processes = ChaosProcesses(workdir=tmp_path, base_env={"PYTHONPATH": str(tmp_path)})
    processes.start("stamper", ["stamper"])
    log = tmp_path / "stamper.log"
    deadline = time.monotonic() + 30
    while log.read_text().count("\n") < 200:  # running, and writing
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.01)
    killed = processes.kill("stamper")
    stamps = [float(line) for line in log.read_text().splitlines() if line[:1].isdigit()]
    assert stamps and max(stamps) <= killed
    assert processes.kills == {"stamper": [killed]} and processes.down == {"stamper"}
