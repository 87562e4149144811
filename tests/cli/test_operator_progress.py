"""Long commands say how far they got on stderr when it is a terminal, and stay quiet when it is not."""

from __future__ import annotations

import io

from rich.console import Console

from rollout_cli.progress_bars import ProgressCount, spinner


def _console(*, terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=100), out


def test_the_count_shows_done_of_total_on_a_terminal() -> None:
    console, out = _console(terminal=True)
    with ProgressCount(5000, "publishing clusters to the inventory", console=console) as progress:
        progress.advance(1200)
        progress._progress.refresh()  # type: ignore[union-attr]
        assert "1200/5000" in out.getvalue()
        assert "publishing clusters to the inventory" in out.getvalue()
        progress.advance(3800)
    assert progress.done == 5000


def test_nothing_is_drawn_when_stderr_is_not_a_terminal() -> None:
    console, out = _console(terminal=False)
    with ProgressCount(10, "publishing", console=console) as progress:
        progress.advance(10)
    with spinner("planning", console=console):
        pass
    assert out.getvalue() == ""


def test_the_spinner_names_the_step_on_a_terminal() -> None:
    console, out = _console(terminal=True)
    with spinner("planning fleet.yaml", console=console):
        console.file.flush()
    assert "planning fleet.yaml" in out.getvalue()
