"""Every table the CLI prints stays readable piped or on an 80-column terminal: no value is cut
to "2026-01-01T00:00…". Piped, or too wide for the terminal, a table is plain tab-separated lines
of whole values; a live screen's tables wrap their values instead of cutting them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from rollout_cli.dashboard import status_view, summary_table
from rollout_cli.demo_scenario import builtin_scenario
from rollout_cli.demo_simulation import status_document
from rollout_cli.main import main
from rollout_planner.simulation.runner import Simulator

FLEET = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "cases" / "fleet-200-10pct-mup1.yaml"
SMALL = Path(__file__).resolve().parents[1] / "scenarios" / "bus3-re-registered-cluster-is-not-upgraded-again.yaml"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _plan_values(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Every value `rollout plan` shows in its tables, from its --json output."""
    assert main(["plan", str(FLEET), "--json"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    values: list[str] = []
    for stage in result["stages"]:
        values += [stage["name"], *(p["name"] for p in stage["partitions"])]
        for track in ("controlPlane", "nodes"):
            timeline = stage["timeline"][track]
            values += [t for t in (timeline["earliestStart"], timeline["earliestFinish"]) if t]
    for batch in result["batches"][:40]:
        values += [batch["at"], batch["stage"], batch["track"], batch["partition"], batch["version"]]
    return values


def _assert_whole(out: str, values: list[str]) -> None:
    assert "…" not in out
    lines = out.splitlines()
    for value in values:
        assert any(value in line for line in lines), f"{value!r} is not shown whole on one line"


def test_plan_piped_prints_every_value_whole(capsys: pytest.CaptureFixture[str]) -> None:
    values = _plan_values(capsys)
    assert "2026-01-01T00:00:00+00:00" in values
    assert main(["plan", str(FLEET)]) == 0
    out = capsys.readouterr().out
    _assert_whole(out, values)
    assert "at\tstage\ttrack\tpartition\tversion\tclusters" in out.splitlines()  # a header cut can read


def test_plan_on_an_80_column_terminal_prints_every_value_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    values = _plan_values(capsys)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes the output for a terminal
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", str(FLEET)]) == 0
    _assert_whole(_ANSI.sub("", capsys.readouterr().out), values)


def test_a_table_that_fits_the_terminal_is_drawn(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["plan", str(SMALL)]) == 0
    out = _ANSI.sub("", capsys.readouterr().out)
    assert "│ 2026-01-01T00:00:00+00:00 │ s0    │ controlPlane │ All       │ 1.31.27-gke.8000 │ 1: c-016 │" in out


def _screen(width: int) -> str:
    sim = Simulator(builtin_scenario())
    sim.start()
    while (t := sim.next_time()) is not None and t <= 9 * 3600 + 600:
        sim.step()
    doc = status_document(sim)
    console = Console(file=io.StringIO(), width=width, force_terminal=True)
    console.print(status_view(doc, clock=sim.origin + 9 * 3600 + 600, title="rollout status"))
    console.print(summary_table(doc))
    return _ANSI.sub("", console.file.getvalue())  # type: ignore[attr-defined]


def test_the_status_screen_at_80_columns_wraps_values_instead_of_cutting_them() -> None:
    """STAT-5's screen (`rollout status`, `watch`, the demo) at 80 columns: every value is there,
    folded onto the next line where it does not fit."""
    narrow = _screen(80)
    assert "…" not in narrow
    assert "1.31.13-gke.1023000" in narrow and "maxUnavailablePartitions" in "".join(narrow.split())
