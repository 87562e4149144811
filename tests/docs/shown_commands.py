"""The commands the README and docs/ show a person: every line of their ```sh blocks, the
commands in the "what to do" column of docs/troubleshooting.md and the whole `make ...` and
`docker compose ...` commands in the prose of docs/operations.md.

A line is kept as written (a pipe stays a pipe) without its trailing `# comment`; blank lines are
dropped. Tests refer to a command by its exact text, so a page that changes a command makes the
test that runs it fail until the test follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
# A comment starts at a `#` after blanks; no command on these pages has one inside quotes.
_COMMENT = re.compile(r"\s+#.*$|^#.*$")
# Table cells of troubleshooting.md: "| ... | `rollout resume` |"
_TABLE_COMMAND = re.compile(r"\|\s*(?:fix the cause, then )?`(rollout [^`]+)`(?: to end it early)?\s*\|\s*$")
# Whole commands in the prose of operations.md: "`make kafka`", "`docker compose -f ... --scale executor=4`"
_INLINE_COMMAND = re.compile(r"`((?:make|docker compose) [^`]+)`")


@dataclass(frozen=True, slots=True)
class Shown:
    page: str
    text: str

    def __str__(self) -> str:
        return f"{self.page}: {self.text}"


def _block_lines(text: str) -> list[str]:
    """Command lines; a line ending in `\\` or `|` goes on with the next."""
    lines = []
    for block in _SH_BLOCK.findall(text):
        pending = ""
        for raw in block.splitlines():
            line = _COMMENT.sub("", raw.strip()).strip()
            if not line:
                continue
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1]
            elif pending.endswith("|"):
                pending += " "
            else:
                lines.append(pending)
                pending = ""
    return lines


def shown_commands() -> list[Shown]:
    """Every command shown, once per page, in page order."""
    found: list[Shown] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        lines = _block_lines(text)
        if page.name == "troubleshooting.md":
            lines += [m.group(1) for line in text.splitlines() if (m := _TABLE_COMMAND.search(line))]
        if page.name == "operations.md":
            lines += _INLINE_COMMAND.findall(_SH_BLOCK.sub("", text))
        name = str(page.relative_to(REPO))
        for line in dict.fromkeys(lines):
            found.append(Shown(name, line))
    return found
