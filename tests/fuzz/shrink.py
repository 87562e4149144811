"""Cut a failing scenario document down to a small one that still fails the same way.

Greedy, in passes until nothing more can go: drop script events, clusters (with the health
script entries and clusterNames that name them), stages from the end, scripted health, strategy
fields and optional cluster fields (window, exclusions, group, nodeVersion, ...), each list first
by halves, then one at a time. A candidate is kept when `still_fails(candidate)` says so; a
candidate the format refuses (a stage left empty of names, say) is simply not kept. The caller's
predicate decides what "the same way" means (`oracle.signature`). A budget of predicate calls
and a deadline bound the time.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Any

Doc = dict[str, Any]
Predicate = Callable[[Doc], bool]
CLUSTER_EXTRAS = ("maintenanceWindow", "exclusions", "group", "nodeVersion", "deprecatedApiUsage", "channel")


class Shrinker:
    def __init__(self, still_fails: Predicate, *, budget: int = 400, seconds: float = 30.0) -> None:
        self.still_fails = still_fails
        self.budget = budget
        self.deadline = time.monotonic() + seconds
        self.calls = 0

    def _spent(self) -> bool:
        return self.calls >= self.budget or time.monotonic() > self.deadline

    def _try(self, candidate: Doc) -> bool:
        if self._spent():
            return False
        self.calls += 1
        try:
            return self.still_fails(candidate)
        except ValueError:  # includes pydantic's ValidationError: the candidate is no scenario
            return False

    def shrink(self, doc: Doc) -> Doc:
        best = copy.deepcopy(doc)
        changed = True
        while changed and not self._spent():
            changed = False
            for candidate in self._candidates(best):
                if self._try(candidate):
                    best, changed = candidate, True
                    break
        return best

    def _candidates(self, doc: Doc) -> Iterator[Doc]:
        yield from _without_items(doc, ("events",))
        for names in _chunks([c["name"] for c in doc.get("clusters", [])]):
            yield without_clusters(doc, set(names))
        for key in ("notReady", "failures"):
            yield from _without_items(doc, ("simulation", key))
        yield from _simpler_stages(doc, lambda d: d["sequence"])
        for position, event in enumerate(doc.get("events", [])):
            if "sequence" in event:  # a SEQ-7 change: its definition shrinks like the first one
                yield from _simpler_stages(doc, lambda d, i=position: d["events"][i]["sequence"])
        for index, spec in enumerate(doc.get("clusters", [])):
            for key in CLUSTER_EXTRAS:
                if key in spec:
                    simpler = copy.deepcopy(doc)
                    del simpler["clusters"][index][key]
                    yield simpler


def _simpler_stages(doc: Doc, where: Callable[[Doc], Doc]) -> Iterator[Doc]:
    """Candidates with one stage of the definition `where` finds simpler: fewer trailing stages,
    no strategy, one strategy field less, no soak (override)."""
    stages = where(doc)["stages"]
    for cut in range(1, len(stages)):
        smaller = copy.deepcopy(doc)
        where(smaller)["stages"] = stages[:cut]
        yield smaller
    for index, stage in enumerate(stages):
        strategy = stage.get("rolloutStrategy")
        if strategy is not None:
            simpler = copy.deepcopy(doc)
            del where(simpler)["stages"][index]["rolloutStrategy"]
            yield simpler
            for key in sorted(strategy) if len(strategy) > 1 else []:
                simpler = copy.deepcopy(doc)
                del where(simpler)["stages"][index]["rolloutStrategy"][key]
                yield simpler
        for key in ("soakOverrides", "soak"):
            if key in stage:
                simpler = copy.deepcopy(doc)
                del where(simpler)["stages"][index][key]
                yield simpler


def without_clusters(doc: Doc, names: set[str]) -> Doc:
    """`doc` without these clusters and the health script entries and stage name lists naming them."""
    out = copy.deepcopy(doc)
    out["clusters"] = [c for c in out.get("clusters", []) if c["name"] not in names]
    simulation = out.get("simulation", {})
    for key in ("notReady", "failures"):
        if key in simulation:
            simulation[key] = [e for e in simulation[key] if e["cluster"] not in names]
    for stage in out["sequence"]["stages"]:
        if "clusterNames" in stage:
            stage["clusterNames"] = [n for n in stage["clusterNames"] if n not in names]
    return out


def _without_items(doc: Doc, path: tuple[str, ...]) -> Iterator[Doc]:
    holder = doc
    for key in path[:-1]:
        holder = holder.get(key, {})
    items = holder.get(path[-1], [])
    for indexes in _chunks(list(range(len(items)))):
        out = copy.deepcopy(doc)
        target = out
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = [item for i, item in enumerate(items) if i not in set(indexes)]
        yield out


def _chunks(items: list[Any]) -> Iterator[list[Any]]:
    """All, then halves, quarters, ... then single items: big cuts are tried before small ones."""
    size = len(items)
    while size >= 1:
        for begin in range(0, len(items), size):
            yield items[begin : begin + size]
        size //= 2
