"""What must hold for any scenario: the oracle of the generative test and `make fuzz`.

1. The simulation raises nothing.
2. After every decision the engine's own audit (`engine.audit`) finds no drift.
3. A restart changes nothing: before decision `twin_at` the state is dumped and loaded as a twin
   (`engine.snapshot`, what the planner does after a restart); from there on the twin decides the
   same events at the same instants and must produce the same commands, and in the end the same
   snapshot.
4. The shared conformance checker's invariants hold on the report: its `Case`, imported from its
   file (read-only), with two readings made closer (`checker_rulings`); every line it reports is a
   failure.
5. What the shared checker does not know of the CHK rules: no upgrade starts within its disruption
   budget (CHK-4, `budget_oracle`).

`problems(doc)` returns the failures as short strings, the first one's `signature` naming the kind
of failure, which the shrinker keeps while it cuts the scenario down.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import shared_checker
from budget_oracle import budget_problems
from checker_rulings import corrected

from rollout_common.commands import Command, WaitChanged
from rollout_common.events import Event, EventBatch
from rollout_common.recurrence import Recurrence
from rollout_planner.engine import decide
from rollout_planner.engine.audit import audit
from rollout_planner.engine.model import EngineState
from rollout_planner.engine.snapshot import document, dump, load
from rollout_planner.simulation.runner import Simulator
from rollout_planner.simulation.scenario import Scenario

RULE = re.compile(r"[A-Z]+-\d+[a-z]?")  # a SPEC rule ID, kept in a signature


@functools.cache
def load_checker() -> ModuleType:
    """The shared checker, in a copy of its own whose window evaluation is `_AnchoredRrule` and whose
    `Case` reads two shapes as the simulator does (`checker_rulings`, each with its argument)."""
    module = shared_checker.load_checker(name="fuzz_conformance_check")
    module.rrule = _AnchoredRrule
    module.Case = corrected(module.Case, seconds=module.seconds, vkey=module.vkey)
    return module


class _AnchoredRrule:
    """Stands in for dateutil's `rrule` module inside the checker: its `rrulestr(...).before(...)`
    answered by the anchored `Recurrence`. The checker asks the plain rrule, which walks every
    occurrence since a window's start, about every started upgrade: seconds per scenario with
    windows from 2015. `Recurrence` is proven equal to the plain rrule by tests/unit/test_recurrence.py."""

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def rrulestr(text: str, dtstart: dt.datetime) -> _Before:
        return _Before(Recurrence(text, dtstart))


class _Before:
    def __init__(self, recurrence: Recurrence) -> None:
        self.recurrence = recurrence

    def before(self, moment: dt.datetime, inc: bool = False) -> dt.datetime | None:
        assert inc, "the checker asks for the occurrence at or before an instant"
        return self.recurrence.at_or_before(moment)


class OracleError(AssertionError):
    """An oracle problem found mid-run; the message starts with its kind (`audit:`, `restart:`)."""


class CheckedSimulator(Simulator):
    """The simulator, with the audit after every decision and a restarted twin from decision `twin_at`."""

    def __init__(self, scenario: Scenario, *, twin_at: int) -> None:
        super().__init__(scenario)
        self.twin_at = twin_at
        self.twin: EngineState | None = None

    def _decide(self, events: list[Event], t: float) -> list[Command]:
        if self.report.decisions == self.twin_at:
            self.twin = load(dump(self.state))
            drift = audit(self.twin)  # a fact rebuilt on load that the live state holds otherwise
            if drift:
                raise OracleError(f"restart: at t={t} the reloaded state fails the audit: {'; '.join(drift[:3])}")
        commands = super()._decide(events, t)
        drift = audit(self.state)
        if drift:
            raise OracleError(f"audit: at t={t}: {'; '.join(drift[:3])}")
        if self.twin is not None:
            try:
                _, again = decide(self.twin, EventBatch(events=tuple(events)), self.origin + t)
            except Exception as exc:  # the live state took the same events
                raise OracleError(f"restart: at t={t} the reloaded state raised {type(exc).__name__}: {exc}") from exc
            if _lasting(again) != _lasting(commands):
                difference = _first_difference(commands, again)
                raise OracleError(f"restart: at t={t} the reloaded state decided otherwise: {difference}")
        return commands

    def check_twin(self) -> None:
        if self.twin is not None and _facts(self.twin) != _facts(self.state):
            raise OracleError("restart: the reloaded state ended elsewhere than the live one")


def _facts(state: EngineState) -> dict[str, Any]:
    """The state's snapshot document with its timers in order: the timers are a heap, whose list
    order depends on the pushes and pops that built it, not on what is due when (fuzz seed 10567:
    the same seven timers, laid out differently in the live and the reloaded heap)."""
    facts = document(state)
    facts["timers"] = sorted(facts["timers"], key=repr)
    return facts


def _lasting(commands: list[Command]) -> list[Command]:
    """The commands a restart must repeat exactly. A stage's last announced waits are not in the
    snapshot (they are a notice, not a fact), so a reloaded planner announces them once more."""
    return [c for c in commands if not isinstance(c, WaitChanged)]


def _first_difference(live: list[Command], twin: list[Command]) -> str:
    live, twin = _lasting(live), _lasting(twin)
    for a, b in zip(live, twin, strict=False):
        if a != b:
            return f"{a!r} vs {b!r}"[:300]
    return f"{len(live)} vs {len(twin)} commands"


def problems(doc: dict[str, Any], *, twin_at: int) -> list[str]:
    """Everything wrong with running `doc`; an empty list when all four points hold."""
    scenario = Scenario.model_validate(doc)
    sim = CheckedSimulator(scenario, twin_at=twin_at)
    try:
        report = sim.run()
        sim.check_twin()
    except OracleError as exc:
        return [str(exc)]
    except Exception as exc:  # the first point: whatever the engine raises is a finding
        return [f"exception: {type(exc).__name__}: {exc}"]
    try:
        case = load_checker().Case(Path(f"{scenario.name}.yaml"), doc, report.as_json())
        case.run()
    except Exception as exc:  # the checker choking on a report is a finding about the report
        return [f"check: crashed: {type(exc).__name__}: {exc}"]
    return [f"check: {e}" for e in case.errors] + budget_problems(scenario, report.as_json())


def signature(problem: str) -> str:
    """The kind of a problem, without the times, names and numbers that change as a scenario shrinks."""
    kind, _, rest = problem.partition(": ")
    if kind == "exception":
        return f"exception: {rest.split(':')[0]}"
    if kind == "check":
        head = rest.split(":")[0]
        words = [w for w in head.split() if RULE.fullmatch(w) or not any(ch.isdigit() for ch in w)]
        return "check: " + " ".join(words)
    return kind
