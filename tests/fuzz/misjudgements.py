"""The shared checker's known approximations, each argued from the report rather than accepted by seed.

`check.py` re-derives GATE-1 and GATE-3 from a report with a few shortcuts that are right on its own
cases but not on every generated sequence. Each shortcut below is named with the exact fact that
SPEC and FORMAT state in its place. `argue` runs the checker as it is, then with the exact facts
instead of the shortcuts (subclasses of its `Case` overriding one method each; the checker's file is
only read). A line of the plain run is a misjudgement of a kind when it is gone once that kind's
fact (or, failing a single one, the smallest set of facts) replaces the shortcut; every other line
stays a failure. Each replacement only ever answers "not in flight" or "done" where the plain
checker's answer is provably wider than SPEC's, so it hides no breach that SPEC's own count shows:
a real breach keeps its line (tests/fuzz/test_misjudgements.py).

- `GATE1_NEXT_RUN` (GATE-1; FORMAT: a partition's unavailable count covers "the clusters it handed
  out that have left it ... until their upgrade in flight reports a result"): `Case.in_flight` asks
  whether *any* upgrade of the cluster runs at t, so a cluster that left the partition and whose
  upgrade from it reported at or before t still holds the partition's slot when a later batch of
  the same instant (another partition, or the other track) starts its next upgrade. Exact: the
  upgrade that the cluster's last hand-out before the judged batch started (same track, same start)
  has not reported by t.
- `GATE3_OTHER_TRACK` (GATE-3 through GATE-2's "done"; SOAK-1: each track has "its own partitions,
  batches and gates"): `Case.targeted_by` is per cluster, so a first-stage cluster whose *nodes* the
  release upgrades counts as targeted, hence pending, on the control-plane track as well (and the
  other way round). Exact: the release starts one of its versions on the cluster on the judged
  track, or offers a target for its control plane's minor.
- `GATE3_LOOK_AHEAD` (GATE-3 through GATE-2: "clusters the rollout will not upgrade count as done
  when ready", judged "right now"; VER-1: first stage, the target for the cluster's own *current*
  minor): `Case.targeted_by` takes a cluster as targeted whenever the report shows the release
  upgrading it, even later, so a cluster the release has no target for at t (its minor), which
  another release only afterwards moves to a minor the release targets, counts as pending at t.
  Exact: the release offers a target for its control plane's minor at t, or one of its versions
  was started on the cluster at or before t.
- `GATE3_BEYOND_TARGET` (GATE-3 through GATE-2: "clusters the rollout will not upgrade count as done
  when ready"; VER-1; a stage never moves a cluster to a lower version): `Case.done_at` takes a
  first-stage cluster as done only on one of the release's own versions or at least the batch's
  version, so a cluster that another release moved past what this release holds for it counts as
  pending, though this release can no longer move it. Exact: ready, and on the judged track at or
  above what the release started there (a rollout upgrades a cluster once per track), or, where it
  started nothing there yet, at or above what it holds: on the control-plane track its target for
  the control plane's current minor (VER-1; VER-6a on demand), on the nodes track every version of
  the release up to the control plane the cluster will run (VER-6: nodes never above it).
- `GATE3_INELIGIBLE_THEN` (GATE-3 through GATE-2, the same sentence; VER-6: downstream, a cluster
  gets the qualified version it is eligible for, its control plane at most one minor up, its nodes
  never above its control plane): `Case.done_at` reads INELIGIBLE from the report's *final* status,
  which is the last word of whichever rollout touched the cluster last (another rollout that
  upgraded it: COMPLETE; this one cancelled: PENDING), so a downstream cluster that the batch's
  rollout cannot upgrade counts as pending. Exact: in a downstream stage, a ready cluster whose
  control plane is two or more minors below the batch's version is INELIGIBLE for that rollout
  (INCOMPATIBLE_VERSION) on both tracks: its control plane cannot take the version, so neither can
  its nodes; it is done.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import Any


class Misjudgement(StrEnum):
    GATE1_NEXT_RUN = "GATE-1 counts a cluster that left the partition by its next upgrade, started at that instant"
    GATE3_OTHER_TRACK = "GATE-3 counts a cluster pending on a track the release does not upgrade it on"
    GATE3_LOOK_AHEAD = "GATE-3 counts a cluster pending that the release targets only after a later upgrade"
    GATE3_BEYOND_TARGET = "GATE-3 counts a cluster pending that another release moved past its target"
    GATE3_INELIGIBLE_THEN = "GATE-3 counts a cluster pending that the rollout cannot upgrade (read from a later status)"


@dataclass
class Verdict:
    """The checker's lines on one report: those still failing, and those argued away, by kinds."""

    failures: list[str] = field(default_factory=list)
    argued: list[tuple[tuple[Misjudgement, ...], str]] = field(default_factory=list)


def argue(checker: ModuleType, path: Path, scenario: dict[str, Any], report: dict[str, Any]) -> Verdict:
    """Run `checker.Case` on the report and sort its lines into failures and argued misjudgements."""
    plain = checker.Case(path, scenario, report)
    plain.run()
    verdict = Verdict()
    unexplained = list(plain.errors)
    for size in range(1, len(Misjudgement) + 1):
        for kinds in itertools.combinations(Misjudgement, size):
            candidates = [line for line in unexplained if all(line.startswith(_RULE[k]) for k in kinds)]
            if not candidates:
                continue
            case = _variant(checker, kinds)(path, scenario, report)
            case.run()
            still = {_subject(e) for e in case.errors}
            for line in candidates:
                if _subject(line) not in still:
                    verdict.argued.append((kinds, line))
                    unexplained.remove(line)
    verdict.failures = unexplained
    return verdict


def describe(kinds: tuple[Misjudgement, ...]) -> str:
    return " + ".join(k.name for k in kinds)


_RULE = {
    Misjudgement.GATE1_NEXT_RUN: "GATE-1:",
    Misjudgement.GATE3_OTHER_TRACK: "GATE-3:",
    Misjudgement.GATE3_LOOK_AHEAD: "GATE-3:",
    Misjudgement.GATE3_BEYOND_TARGET: "GATE-3:",
    Misjudgement.GATE3_INELIGIBLE_THEN: "GATE-3:",
}


def _subject(line: str) -> str:
    """The batch a GATE line is about, without the counts that a replacement may change."""
    return line.split(" with ")[0]


def _variant(checker: ModuleType, kinds: tuple[Misjudgement, ...]) -> type:
    cache = checker.__dict__.setdefault("_argued_variants", {})
    if kinds not in cache:
        mixins = tuple(_MIXIN[k] for k in kinds)
        cache[kinds] = type("Exact" + "".join(m.__name__ for m in mixins), (*mixins, checker.Case), {"_check": checker})
    return cache[kinds]  # type: ignore[no-any-return]


def _runs_by_track(report: dict[str, Any]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(cluster, track) -> [(start, result)] from the report's cluster events; no result: inf."""
    runs: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    open_runs: dict[tuple[str, str], float] = {}
    for e in report.get("clusterEvents", []):
        key = (e["cluster"], e.get("track"))
        if e["event"] == "started":
            open_runs[key] = e["t"]
        elif e["event"] in ("succeeded", "failed") and key in open_runs:
            runs[key].append((open_runs.pop(key), e["t"]))
    for key, start in open_runs.items():
        runs[key].append((start, math.inf))
    return runs


class NextRun:
    """`in_flight`, asked by GATE-1's count of clusters that left the partition: the upgrade that the
    cluster's last hand-out before the judged batch started, not any upgrade at t."""

    rep: dict[str, Any]

    def run(self) -> None:
        batches = self.rep.get("batches", [])
        self._position = {id(b): i for i, b in enumerate(batches)}
        self._hand_outs: dict[str, list[tuple[int, float, str]]] = defaultdict(list)
        for i, b in enumerate(batches):
            for n in b["clusters"]:
                self._hand_outs[n].append((i, b["t"], b["track"]))
        self._track_runs = _runs_by_track(self.rep)
        self._judged = len(batches)
        super().run()  # type: ignore[misc]

    def batch_errors(self, b: dict[str, Any], *args: Any) -> list[str]:
        self._judged = self._position[id(b)]
        return super().batch_errors(b, *args)  # type: ignore[misc,no-any-return]

    def in_flight(self, name: str, t: float) -> bool:
        earlier = [h for h in self._hand_outs.get(name, []) if h[0] < self._judged]
        if earlier:
            _, handed, track = earlier[-1]
            results = [z for a, z in self._track_runs.get((name, track), []) if a == handed]
            if results:
                return handed <= t < results[0]
        return super().in_flight(name, t)  # type: ignore[misc,no-any-return]


class _Judging:
    """Remembers the track `done_at` judges, and answers `targeted_by` from the started upgrades on
    record, narrowed to that track (`_per_track`) and to those started by t (`_until_t`)."""

    rep: dict[str, Any]
    scn: dict[str, Any]
    _check: ModuleType
    _judged_track: str | None = None
    _per_track = False
    _until_t = False

    def run(self) -> None:
        self._starts: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
        for e in self.rep.get("clusterEvents", []):
            if e["event"] == "started":
                self._starts[e["cluster"]].append((e["t"], e.get("track"), e.get("version")))
        super().run()  # type: ignore[misc]

    def done_at(self, name: str, stage: str, first: bool, track: str, version: str, t: float) -> bool:
        outer = self._judged_track
        self._judged_track = track
        try:
            return super().done_at(name, stage, first, track, version, t)  # type: ignore[misc,no-any-return]
        finally:
            self._judged_track = outer

    def ready_at(self, name: str, t: float) -> bool:
        """While judging "done": ready, and no upgrade of the cluster (either track) in flight at t.
        The checker's own `ready_at` skips a `notReady` at t itself, so a cluster that another batch
        of the same instant handed out just before would pass as ready and done (SOAK-1: a cluster
        is unavailable to both tracks' gates while an upgrade on either track runs)."""
        ready = bool(super().ready_at(name, t))  # type: ignore[misc]
        if self._judged_track is None:
            return ready
        return ready and not self._check.Case.in_flight(self, name, t)

    def targeted_by(self, offer: tuple[set[Any], set[str]], name: str, t: float) -> bool:
        if self._judged_track is None or not (self._per_track or self._until_t):
            return super().targeted_by(offer, name, t)  # type: ignore[misc,no-any-return]
        minors, versions = offer
        if any(
            version in versions
            and (not self._per_track or track == self._judged_track)
            and (not self._until_t or at <= t)
            for at, track, version in self._starts.get(name, [])
        ):
            return True
        return self._check.minor(self._now(name, "controlPlane", t)) in minors  # type: ignore[no-any-return]

    def _now(self, name: str, track: str, t: float) -> str:
        return max(self.versions_until(name, track, t), key=self._check.vkey)  # type: ignore[attr-defined,no-any-return]


class OtherTrack(_Judging):
    """`targeted_by` on the track `done_at` judges: versions started on that track only."""

    _per_track = True


class LookAhead(_Judging):
    """`targeted_by` at t: versions of the release started on the cluster at or before t only."""

    _until_t = True


class BeyondTarget(_Judging):
    """`done_at` also counts a ready first-stage cluster that the release offering the batch's
    version can no longer move up on the judged track: every version the release holds for that
    track at t (VER-1, VER-6a; nodes never above the planned control plane) is at or below it."""

    def run(self) -> None:
        self._releases: list[tuple[dict[tuple[int, ...], str], bool]] = []  # (minor -> target, on demand)
        for e in self.scn.get("events") or []:
            rt, sr = e.get("releaseTarget"), e.get("startRollout")
            if rt:
                targets = rt.get("targets") or {}
                self._releases.append(
                    ({tuple(int(x) for x in str(m).split(".")): str(v) for m, v in targets.items()}, False)
                )
            elif sr and sr.get("version"):
                v = str(sr["version"])
                major, mnr = self._check.minor(v)
                self._releases.append(({(major, mnr): v, (major, mnr - 1): v}, True))
        super().run()  # type: ignore[misc]

    def done_at(self, name: str, stage: str, first: bool, track: str, version: str, t: float) -> bool:
        if super().done_at(name, stage, first, track, version, t):
            return True
        if not first or not self.ready_at(name, t):  # type: ignore[attr-defined]
            return False
        offering = [release for release in self._releases if version in release[0].values()]
        if not offering or any(release != offering[0] for release in offering):
            return False  # a version of different releases: not this shortcut (START-4: a repeat is one)
        targets, _ = offering[0]
        vkey = self._check.vkey
        control_plane, current = self._now(name, "controlPlane", t), self._now(name, track, t)

        def upgraded(on: str) -> list[str]:  # the release's versions started on that track by t
            return [v for at, tr, v in self._starts.get(name, []) if tr == on and at <= t and v in targets.values()]

        if upgraded(track):  # once per track (VER-6): done once at or above what it started
            return bool(vkey(current) >= max(vkey(v) for v in upgraded(track)))
        own = targets.get(self._check.minor(control_plane))  # VER-1 / VER-6a: the current minor's
        if track == "controlPlane":
            return own is not None and bool(vkey(control_plane) >= vkey(own))
        planned = max([control_plane, *(upgraded("controlPlane") or ([own] if own else []))], key=vkey)
        return all(vkey(v) <= vkey(current) for v in targets.values() if vkey(v) <= vkey(planned))


class IneligibleThen(_Judging):
    """`done_at` also counts a ready downstream cluster that the batch's version cannot reach (VER-6)."""

    def done_at(self, name: str, stage: str, first: bool, track: str, version: str, t: float) -> bool:
        if super().done_at(name, stage, first, track, version, t):
            return True
        if first or not self.ready_at(name, t):  # type: ignore[attr-defined]
            return False
        control_plane = self._now(name, "controlPlane", t)
        (major, mnr), (cp_major, cp_mnr) = self._check.minor(version), self._check.minor(control_plane)
        return major == cp_major and mnr - cp_mnr >= 2


_MIXIN: dict[Misjudgement, type] = {
    Misjudgement.GATE1_NEXT_RUN: NextRun,
    Misjudgement.GATE3_OTHER_TRACK: OtherTrack,
    Misjudgement.GATE3_LOOK_AHEAD: LookAhead,
    Misjudgement.GATE3_BEYOND_TARGET: BeyondTarget,
    Misjudgement.GATE3_INELIGIBLE_THEN: IneligibleThen,
}
