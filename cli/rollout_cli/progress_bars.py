"""Progress of long commands on stderr: a spinner, and a count redrawn in place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn


@contextmanager
def spinner(message: str, *, console: Console | None = None) -> Iterator[None]:
    """A rich spinner on stderr while a long step runs; nothing when stderr is not a terminal."""
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield
        return
    with console.status(message):
        yield


class ProgressCount:
    """`published 1200/5000 clusters` on stderr, redrawn in place; nothing when stderr is not a terminal."""

    def __init__(self, total: int, what: str, *, console: Console | None = None) -> None:
        self.total, self.done, self.what = total, 0, what
        self._console = console or Console(stderr=True)
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> ProgressCount:
        if self._console.is_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=self._console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.what, total=self.total)
        return self

    def advance(self, count: int) -> None:
        self.done += count
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
