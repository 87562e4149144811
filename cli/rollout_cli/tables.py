"""Tables that never cut a value: drawn when they fit, plain lines when they do not or are piped.

rich shortens a cell that does not fit its column to "2026-01-01T00:00…", so a pipe (80 columns
by default) or a narrow terminal lost the very times and names a person looks for. A table that
fits the terminal is drawn; otherwise, and whenever the output is not a terminal, it is printed
as plain lines, one row per line, cells separated by tabs under a header line: whole values that
grep, cut and awk can use.
"""

from __future__ import annotations

from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table


def show(console: Console, table: Table) -> None:
    """Print `table` drawn when the console is a terminal wide enough for every value, else as plain lines."""
    if console.is_terminal and _natural_width(console, table) <= console.width:
        console.print(table)
        return
    for line in plain_lines(table):
        # written as it is: rich would expand the tabs and read "[prod]" as markup
        print(line, file=console.file)


def plain_lines(table: Table) -> list[str]:
    """The title (if any), the header and one line per row, cells separated by tabs."""
    title = [f"# {table.title}"] if table.title else []
    header = "\t".join(_text(column.header) for column in table.columns)
    rows = ["\t".join(_text(cell) for cell in row) for row in _rows(table.columns)]
    return [*title, header, *rows]


def folding(table: Table) -> Table:
    """`table` with every column wrapping its values instead of cutting them (for a live screen,
    which must stay a table at any width)."""
    for column in table.columns:
        column.no_wrap = False
        column.overflow = "fold"
    return table


def _natural_width(console: Console, table: Table) -> int:
    # The width the table takes with no cell wrapped: its widest rendering.
    return Measurement.get(console, console.options.update(width=10**6), table).maximum


def _rows(columns: list[Column]) -> list[list[object]]:
    cells = [list(column.cells) for column in columns]
    return [list(row) for row in zip(*cells, strict=True)]


def _text(cell: object) -> str:
    plain = getattr(cell, "plain", None)  # a rich Text
    text = plain if isinstance(plain, str) else str(cell)
    return " ".join(text.split())  # one line per row: a cell's own line breaks become spaces


__all__ = ["folding", "plain_lines", "show"]
