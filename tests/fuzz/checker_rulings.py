"""Where the fuzz oracle reads a scenario more closely than the shared checker, each with its rule.

The shared checker (../shared/conformance/check.py) is read, never edited; the campaign found two
shapes it judges by a reading SPEC and FORMAT do not support, and `corrected` gives the oracle a
`Case` that reads them as the simulator does. Each reading has a file under found/ that the plain
checker flags and this one passes, and a test that a real breach of the same rule is still flagged
(test_checker_rulings.py). Nothing else of the checker changes.

1. **An on-demand rollout upgrades only the tracks it names (START-2).** The checker's offer of a
   `startRollout` ignores `tracks`: for a nodes-only rollout it still counts the control plane as
   going to V, so it holds the nodes of a cluster whose control plane stays below V as "would still
   be upgraded" (VER-6: nodes never above their control plane) and calls their partition NotReady
   (GATE-3). The engine counts such a cluster done when ready; a control-plane-only rollout targets
   no nodes at all. Found by fuzz seeds 1084055 and 1096926.
2. **Events of one instant apply in the order listed (FORMAT: "events: in time order").** The
   checker counts a release as offered before an operator command of the same instant even when it
   is listed after it, so a `cancel` given before the release (rejected: no rollout was active)
   reads as cancelling it (OPS-1). The simulator applies the cancel first, then starts the rollout;
   listed the other way round, the cancel cancels it. Found by fuzz seed 1103272.
"""

from __future__ import annotations

from typing import Any

TRACKS = ("controlPlane", "nodes")
_CONTROL = ("pause", "resume", "cancel")
_LATER = 1e-6  # seconds: after the command of the same instant, before anything later


def corrected(case: type[Any], *, seconds: Any, vkey: Any) -> type[Any]:
    """`case` (the checker's `Case`) with the two readings above; `seconds` and `vkey` are the
    checker's own parsers, so times and versions compare as it compares them."""

    class RulingsCase(case):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # the tracks of each offer, in the order the checker built `offers` (release, on-demand)
            self.offer_tracks: list[tuple[str, ...]] = []
            for event in self.scn.get("events") or []:
                release = event.get("releaseTarget")
                start = event.get("startRollout") or (event.get("command") or {}).get("startRollout")
                if release:
                    self.offer_tracks.append(TRACKS)
                if start and start.get("version"):
                    self.offer_tracks.append(tuple(start.get("tracks") or TRACKS))

        def targeted_by(self, offer: dict[Any, str], name: str, track: str, t: float) -> bool:
            tracks = next((tr for o, tr in zip(self.offers, self.offer_tracks, strict=True) if o is offer), TRACKS)
            if track not in tracks:
                return False
            if track == "nodes" and "controlPlane" not in tracks:
                return self._nodes_only_targets(offer, name, t)
            return bool(super().targeted_by(offer, name, track, t))

        def _nodes_only_targets(self, offer: dict[Any, str], name: str, t: float) -> bool:
            """The checker's nodes rule with the control plane where it is: the rollout does not move it."""
            now = vkey(self.current(name, "nodes", t))
            started = [
                vkey(v) for at, k, v in self.starts.get(name, []) if k == "nodes" and at <= t and v in offer.values()
            ]
            if started:
                return bool(now < max(started))
            ceiling = vkey(self.current(name, "controlPlane", t))
            held = [vkey(v) for v in offer.values() if vkey(v) <= ceiling]
            return bool(held) and now < max(held)

        def check_control(self) -> None:
            original = self.scn
            self.scn = {**original, "events": in_listed_order(original.get("events") or [], seconds=seconds)}
            try:
                super().check_control()
            finally:
                self.scn = original

    return RulingsCase


def in_listed_order(events: list[dict[str, Any]], *, seconds: Any) -> list[dict[str, Any]]:
    """The events, a release or on-demand start listed after an operator command of its own instant
    moved a microsecond later: the checker then sees it offered after the command, as it was."""
    out: list[dict[str, Any]] = []
    commanded: set[float] = set()
    for event in events:
        at = seconds(event["at"])
        command = event.get("command") or {}
        if any(kind in command for kind in _CONTROL):
            commanded.add(at)
        offers = event.get("releaseTarget") or event.get("startRollout") or command.get("startRollout")
        out.append({**event, "at": at + _LATER} if offers and at in commanded else event)
    return out
