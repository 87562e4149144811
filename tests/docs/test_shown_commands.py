"""What counts as a command a page shows (tests/docs/test_doc_commands.py runs each one)."""

from __future__ import annotations

from shown_commands import commands_in

PAGE = """# A page

Run `make kafka`, then `rollout release --channel regular --target 1.30=1.31.2 --id r-1`;
`rollout apply` and `make` alone are names, not commands.

```sh
export A=1 B=2   # what make printed
python -m rollout_executor &
echo '{"a": 1}' |
  kcat -P -b localhost:9092 \\
    -t topic
# a whole-line comment
make kafka
```

```text
rollout not-a-command
```

| state | what to do |
|---|---|
| `PAUSED` | fix the cause, then `rollout resume` |
"""


def test_blocks_prose_and_table_cells() -> None:
    assert [s.text for s in commands_in("docs/troubleshooting.md", PAGE)] == [
        "export A=1 B=2",
        "python -m rollout_executor &",
        """echo '{"a": 1}' | kcat -P -b localhost:9092 -t topic""",
        "make kafka",
        "rollout resume",
        "rollout release --channel regular --target 1.30=1.31.2 --id r-1",
    ]


def test_table_cells_count_only_on_the_troubleshooting_page() -> None:
    assert "rollout resume" not in [s.text for s in commands_in("docs/other.md", PAGE)]


def test_a_background_ampersand_is_the_same_command() -> None:
    shown = commands_in("README.md", PAGE)[1]
    assert shown.command == "python -m rollout_executor"
    assert str(shown) == "README.md: python -m rollout_executor &"
