"""The commands the README and docs/ show a person: every line of their ```sh blocks, the
commands in the "what to do" column of docs/troubleshooting.md, and whole `make`, `docker
compose`, `kcat` and `rollout VERB --OPTION` commands in their prose.

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
# Whole commands in prose: "`make kafka`", "`docker compose -f ... --scale executor=4`", "`kcat -C ...`",
# "`rollout release --channel ...`". A bare name ("`rollout apply`", "`make test`" in a sentence
# about it) is a command too when it is complete as written.
_INLINE_COMMAND = re.compile(r"`((?:make [a-z][\w-]*|docker compose -f [^`]+|kcat -[^`]+|rollout [a-z]+ --[^`]+))`")


@dataclass(frozen=True, slots=True)
class Shown:
    page: str
    text: str

    def __str__(self) -> str:
        return f"{self.page}: {self.text}"

    @property
    def command(self) -> str:
        """The text without a trailing `&`: the same command, in the background or not."""
        return self.text.removesuffix("&").rstrip()


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


def commands_in(name: str, text: str) -> list[Shown]:
    """The commands page `name` shows, once each, in page order."""
    lines = _block_lines(text)
    if Path(name).name == "troubleshooting.md":
        lines += [m.group(1) for line in text.splitlines() if (m := _TABLE_COMMAND.search(line))]
    lines += _INLINE_COMMAND.findall(_SH_BLOCK.sub("", text))
    return [Shown(name, line) for line in dict.fromkeys(lines)]


def shown_commands() -> list[Shown]:
    """Every command the README and docs/ show."""
    return [s for page in PAGES for s in commands_in(str(page.relative_to(REPO)), page.read_text(encoding="utf-8"))]
