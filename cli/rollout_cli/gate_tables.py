"""The stage gates on the status screen: approval gates (CHK-1) and metric checks (CHK-2), one table each.

Drawn by `status_view` under the waits, only for a document whose stages list gates or checks, in
the words the web dashboard uses too (`rollout_common.status_words`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from rollout_cli import tables
from rollout_common.status_words import (
    approval_text,
    check_condition_text,
    check_counts_text,
    check_result_text,
    check_rows,
    clock_text,
    gate_rows,
)

Doc = Mapping[str, Any]
_BOX = box.SIMPLE_HEAD  # as the status screen's other tables
_OUTCOME_STYLE = {"passed": "green", "failed": "bold red", "inconclusive": "bold yellow"}


def gates_table(doc: Doc, *, clock: float) -> RenderableType | None:
    """CHK-1: each approval gate a rollout reached, since when it waits, who approved it when (None: no gates)."""
    rows = gate_rows(doc)
    if not rows:
        return None
    table = Table(box=_BOX, expand=True, pad_edge=False, show_edge=False)
    for column in ("approval gate", "rollout", "waiting since", "approval"):
        table.add_column(column, no_wrap=column != "approval")
    for stage, gate in rows:
        approved = gate.get("approvedAt") is not None
        table.add_row(
            f"{stage} {gate['gate']}",
            str(gate["rollout"]),
            clock_text(float(gate["waitingSince"])),
            Text(approval_text(gate, clock=clock), style="green" if approved else "bold yellow"),
        )
    return tables.folding(table)


def checks_table(doc: Doc) -> RenderableType | None:
    """CHK-2: each metric check's latest value against its condition, and how near it is to halting."""
    rows = check_rows(doc)
    if not rows:
        return None
    table = Table(box=_BOX, expand=True, pad_edge=False, show_edge=False)
    for column in ("metric check", "rollout", "latest result", "condition", "in a row"):
        table.add_column(column, no_wrap=column in ("metric check", "rollout"))
    for stage, check in rows:
        outcome = check.get("outcome")
        style = _OUTCOME_STYLE.get(str(outcome), "dim")
        table.add_row(
            f"{stage} {check['check']}",
            str(check["rollout"]),
            Text(check_result_text(check), style=style),
            check_condition_text(check),
            check_counts_text(check),
        )
    return tables.folding(table)


__all__ = ["checks_table", "gates_table"]
