"""Generated scenarios keep every invariant: no exception, the engine's audit after every decision,
a restarted twin deciding the same, and every invariant of the shared checker on the report (see
oracle.py).

A fixed set of seeds, the first `SEEDS` of `make fuzz`; a failing seed is shrunk to a file with
`python tests/fuzz/campaign.py --first SEED --seeds 1`. The project's own scenarios also go through
the audit and the restart twin, so a restart finding kept under tests/scenarios/ stays tested, and
what the campaign found (found/, each file's header naming the rule and the checker's lines) keeps
every invariant.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from oracle import problems
from scenario_gen import generate, twin_point

SEEDS = 300
CHUNK = 25
RELOAD = re.compile(r"^# reload before decision (\d+)$", re.MULTILINE)
SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
FOUND = Path(__file__).resolve().parent / "found"


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_scenarios_keep_every_invariant(first: int) -> None:
    failing = {
        seed: found
        for seed in range(first, first + CHUNK)
        if (found := problems(generate(seed), twin_at=twin_point(seed)))
    }
    assert not failing, "\n".join(f"seed {seed}: {found[0]}" for seed, found in failing.items())


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_own_scenarios_pass_the_audit_and_a_restart(path: Path) -> None:
    """BUS-6 and the audit on every own scenario; a restart finding names its reload point in a
    `# reload before decision N` line (the format has no field for it: the simulator never restarts)."""
    text = path.read_text()
    doc = yaml.safe_load(text)
    doc.setdefault("name", path.stem)
    for twin_at in [3, *map(int, RELOAD.findall(text))]:
        assert [p for p in problems(doc, twin_at=twin_at) if not p.startswith("check:")] == [], twin_at


@pytest.mark.parametrize("path", sorted(FOUND.glob("*.yaml")), ids=lambda p: p.stem)
def test_what_the_campaign_found_keeps_every_invariant(path: Path) -> None:
    """The rule in each file's name holds: no line of the shared checker, the audit or a restart
    (from its `# reload before decision N`, else decision 3)."""
    text = path.read_text()
    reload = RELOAD.search(text)
    assert problems(yaml.safe_load(text), twin_at=int(reload.group(1)) if reload else 3) == []
