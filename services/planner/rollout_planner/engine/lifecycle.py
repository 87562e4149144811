"""A run's life through a stage: start, stuck, soak, forced soak, complete, qualify (SOAK, VER-2..5)."""

from __future__ import annotations

from rollout_common.checks import CheckPhase
from rollout_common.commands import RolloutTransition
from rollout_common.status import RolloutState, StageReason, StageState
from rollout_common.version import Version
from rollout_planner.engine.eligibility import on_offered, would_take
from rollout_planner.engine.gates.approvals import hold_after, hold_before
from rollout_planner.engine.gates.checks import describe, halted, soak_held
from rollout_planner.engine.gates.start_windows import held_by_window, hold_for_window
from rollout_planner.engine.model import CP, MAX_UPGRADE_TIME, NODES, TRACK_INDEXES, EngineState, Offer, Run, StageRec
from rollout_planner.engine.retarget_pass import retarget_members
from rollout_planner.engine.runs import transition
from rollout_planner.engine.targets import TargetMemo, release_failed, retarget


def reach_stage(state: EngineState, stage: StageRec, offers: dict[int, Offer]) -> None:
    """A version reached this stage on some tracks: open runs; those no `before` gate holds (CHK-1) go in."""
    arrived: list[tuple[Run, Offer]] = []
    for track, offer in offers.items():
        if track not in state.rollouts[offer.rollout_id].tracks:
            continue
        run = Run(
            offer.rollout_id,
            stage.index,
            track,
            StageState.PENDING,
            "",
            opened_at=state.now,
            offered=offer.version or _lowest(offer),
        )
        # SOAK-4c: only a newer rollout overtakes; an older version never cancels a newer run
        for older in list(stage.runs[track].values()):
            if older.state is StageState.STUCK and _newer(state, offer.rollout_id, than=older.rollout_id):
                withdraw(state, stage, older, StageReason.SUPERSEDED)
        stage.runs[track][offer.rollout_id] = run
        if not hold_before(state, stage, run, offer):
            arrived.append((run, offer))
    admit(state, stage, arrived)


def admit(state: EngineState, stage: StageRec, arrived: list[tuple[Run, Offer]]) -> None:
    """Runs let into the stage take up their offers: retarget members, start or stick (SOAK-5 when empty)."""
    opened: list[tuple[Run, Offer]] = []
    for run, offer in arrived:
        if hold_for_window(state, stage, run, offer):
            continue
        run.held_offer = None
        # the offer stands whatever the stage holds now: a cluster that joins later is offered it
        # (SOAK-4b: a stuck first stage starts; SEQ-6a: a late member of a completed run)
        run.offer = offer
        if not stage.members and not stage.no_partition:
            _empty_stage(state, stage, run)
            continue
        stage.forced_run[run.track] = None
        opened.append((run, offer))
    if not opened:
        return
    retarget_members(state, stage, stage.members)
    if any(run.track == CP for run, _ in opened):
        for waiting in stage.runs[NODES].values():
            waiting.awaiting_cp = False
    for run, offer in opened:
        _begin(state, stage, run, offer)
    state.dirty.add(stage.index)


def withdraw(state: EngineState, stage: StageRec, run: Run, reason: StageReason) -> None:
    """Cancel the run and take its offer back: no member is targeted at its versions again (SOAK-4c)."""
    transition(state, run, StageState.CANCELLED, reason)
    if stage.forced_run[run.track] == run.rollout_id:
        stage.forced_run[run.track] = None
    if any(state.clusters[n].target_run[run.track] == run.rollout_id for n in stage.members):
        memo: TargetMemo = {}  # the offers stay as they are for the whole pass
        for name in stage.members:
            cluster = state.clusters[name]
            release_failed(state, cluster, run.rollout_id)
            retarget(state, cluster, memo)
    state.dirty.add(stage.index)


_HALTED_HERE = "the rollout is halted at this stage (CHK-2)"


def _lowest(offer: Offer) -> Version | None:
    values = sorted((offer.by_minor or {}).values())
    return values[0] if values else None


def _empty_stage(state: EngineState, stage: StageRec, run: Run) -> None:
    """SOAK-5: an empty first stage qualifies nothing; an empty later stage passes the version through."""
    if stage.index == 0:
        transition(state, run, StageState.STUCK, StageReason.EMPTY_FIRST_STAGE)
        return
    run.qualified = run.offered
    run.started_at = state.now
    halt = halted_here(state, run)
    if halt is not None:
        # CHK-2: a check halted the rollout here before this track arrived: it waits halted, and a
        # resume passes it through as an empty stage's soak (`resume_halted`)
        run.soak_started = run.soak_end = state.now
        transition(state, run, StageState.PAUSED, halt, detail=_HALTED_HERE)
        return
    if any(check.guards(CheckPhase.SOAK) for check in stage.spec.checks):
        _judged_by_soak_checks(state, stage, run)
        return
    if not hold_after(state, run):
        finish(state, run, StageReason.EMPTY_STAGE_PASS_THROUGH)


def _judged_by_soak_checks(state: EngineState, stage: StageRec, run: Run) -> None:
    """CHK-2: an empty stage's soak checks hold it too: it soaks for no time (SOAK-5 passes the version
    through) and completes once each soak check has passed fresh (a result releases it)."""
    run.soak_started = state.now
    run.soak_end = state.now
    detail = "it passes once its soak checks pass (CHK-2)"
    transition(state, run, StageState.SOAKING, StageReason.EMPTY_STAGE_PASS_THROUGH, detail=detail)
    state.dirty.add(stage.index)


def _begin(state: EngineState, stage: StageRec, run: Run, offer: Offer) -> None:
    if run.remaining > 0:
        _start(state, run)
        return
    # no cluster took this version: find out why (rare, so scanning the stage here is fine)
    members = [state.clusters[n] for n in stage.members]
    upgrades_cp = CP in state.rollouts[run.rollout_id].tracks
    takers = [c for c in members if would_take(offer, c, run.track, upgrades_cp=upgrades_cp)]
    if any(on_offered(offer, c, run.track) for c in members):
        _start(state, run)
    elif run.track == NODES and any(c.target_run[NODES] is None for c in takers):
        # SOAK-1: these nodes follow a control plane whose version has not reached this stage yet
        run.awaiting_cp = True
        _start(state, run)
    elif any(_newer(state, c.target_run[run.track], than=run.rollout_id) for c in takers):
        withdraw(state, stage, run, StageReason.SUPERSEDED)
    elif takers or _older_active(state, stage, run):
        # VER-6: clusters still on their way to an older version may become eligible for this one
        _start(state, run)
    else:
        transition(
            state,
            run,
            StageState.STUCK,
            StageReason.INCOMPATIBLE_VERSION,
            detail=_stuck_detail(state, stage, run),
        )


def _stuck_detail(state: EngineState, stage: StageRec, run: Run) -> str:
    text = f"offered {run.offered}, members on {_version_summary(state, stage, run.track)}"
    if run.track == NODES:  # nodes never go above their control plane (VER-6): say where those are
        text += f" (control planes on {_version_summary(state, stage, CP)})"
    return text


def _version_summary(state: EngineState, stage: StageRec, track: int) -> str:
    versions = sorted({state.clusters[n].versions[track] for n in stage.members})
    return ", ".join(v.text for v in versions[:5])


def _start(state: EngineState, run: Run) -> None:
    run.started_at = state.now
    paused = state.rollouts[run.rollout_id].paused
    halt = halted_here(state, run)
    if paused:
        transition(state, run, StageState.PAUSED, StageReason.USER)
    elif halt is not None:
        transition(state, run, StageState.PAUSED, halt, detail=_HALTED_HERE)
    else:
        transition(state, run, StageState.IN_PROGRESS, StageReason.VERSION_ARRIVED)
    state.add_run_timer(
        state.now + MAX_UPGRADE_TIME, "deadline", stage=run.stage, track=run.track, rollout_id=run.rollout_id
    )


def halted_here(state: EngineState, run: Run) -> StageReason | None:
    """CHK-2: a check halts the rollout at a stage, so a track that reaches the stage after the halt
    waits halted too (a resume starts it) rather than going in under a check that failed."""
    for track in TRACK_INDEXES:
        other = state.stages[run.stage].runs[track].get(run.rollout_id)
        if other is not None and other is not run and halted(other):
            return StageReason(other.reason)
    return None


def _newer(state: EngineState, rollout_id: str | None, *, than: str) -> bool:
    """Whether `rollout_id` was released after `than` (rollouts are kept in creation order)."""
    if rollout_id is None or rollout_id == than:
        return False
    return state.rollouts[rollout_id].number > state.rollouts[than].number


def _older_active(state: EngineState, stage: StageRec, run: Run) -> bool:
    """A run of an older rollout at this stage and track is still handing out upgrades (VER-6).

    Only older rollouts hold a run back: a newer rollout's run is never held by an older version.
    """
    for other in stage.runs[run.track].values():
        if other is run or not _newer(state, run.rollout_id, than=other.rollout_id):
            continue
        if other.active and other.remaining > 0:
            return True
    return False


def _live(state: EngineState, run: Run) -> bool:
    return state.rollouts[run.rollout_id].state in (RolloutState.RUNNING, RolloutState.PAUSED)


def revisit_stuck(state: EngineState, stage: StageRec, track: int) -> None:
    """SOAK-4b: a stuck run is evaluated again when versions or the inventory change: it starts once
    a member is targeted at its versions (one joined an empty first stage, or became eligible)."""
    for run in stage.runs[track].values():
        if run.state is StageState.STUCK and run.remaining and _live(state, run):
            _start(state, run)


def finish_if_done(state: EngineState, stage: StageRec, track: int) -> None:
    """SOAK-2: every eligible cluster upgraded and every partition Ready -> soak."""
    for run in list(stage.runs[track].values()):
        if not run.active or run.remaining > 0 or run.awaiting_cp or _older_active(state, stage, run):
            continue
        if halted(run):
            continue  # CHK-2: a halted run soaks only once resumed
        if run.overtaken:
            withdraw(state, stage, run, StageReason.SUPERSEDED)
            continue
        forced = stage.forced_run[track] is not None
        if not forced and any(p.not_ready(track) for p in stage.partitions):
            continue
        if not run.upgraded and not _any_on_offer(state, stage, run):
            # VER-5: no cluster of the stage was eligible for this version: STUCK, never qualified
            transition(
                state,
                run,
                StageState.STUCK,
                StageReason.INCOMPATIBLE_VERSION,
                detail=_stuck_detail(state, stage, run),
            )
            update_rollout(state, run.rollout_id)
            continue
        start_soak(state, run, forced=False)


def _any_on_offer(state: EngineState, stage: StageRec, run: Run) -> bool:
    """Some member already runs a version the run offers it (eligible, nothing left to do)."""
    if run.offer is None:
        return False
    offer = run.offer
    return any(on_offered(offer, state.clusters[n], run.track) for n in stage.members)


def qualified_version(run: Run) -> Version | None:
    """SOAK-4a: the lowest version upgraded to in this run, else the lowest it worked on."""
    if run.upgraded:
        return min(run.upgraded)
    if run.working:
        return min(run.working)
    return run.offered


def soak_seconds(state: EngineState, stage: StageRec, version: Version | None) -> float:
    text = "" if version is None else version.text
    key = (stage.spec.name, text)
    if key not in state.soak_overrides:
        return stage.spec.soak_for(text)
    override = state.soak_overrides[key]
    # OPS-2: a removed override leaves the stage's own soak, not the definition's override
    return stage.spec.soak if override is None else override


def start_soak(state: EngineState, run: Run, *, forced: bool) -> None:
    stage = state.stages[run.stage]
    run.qualified = qualified_version(run)
    run.soak_started = state.now
    run.soak_end = state.now + soak_seconds(state, stage, run.qualified)
    if forced:
        run.forced = True
        stage.forced_run[run.track] = run.rollout_id
        transition(state, run, StageState.FORCED_SOAKING, StageReason.MAX_UPGRADE_TIME)
    else:
        transition(state, run, StageState.SOAKING, StageReason.ALL_UPGRADED)
    state.dirty.add(stage.index)
    if run.soak_end <= state.now:
        complete(state, run)
    else:
        state.add_run_timer(run.soak_end, "soak", stage=run.stage, track=run.track, rollout_id=run.rollout_id)


def resume_halted(state: EngineState, run: Run) -> None:
    """CHK-2, OPS-1: a run a check halted goes on: one that was soaking soaks its whole soak time
    again, one past its 30-day deadline soaks anyway (SOAK-4), any other one is IN_PROGRESS again.
    Its checks start new series, so their counts start afresh."""
    if run.soak_started is None and not _past_deadline(state, run):
        transition(state, run, StageState.IN_PROGRESS, StageReason.RESUMED)
        return
    if run.soak_started is None:
        start_soak(state, run, forced=True)
        return
    stage = state.stages[run.stage]
    run.soak_started = state.now
    # an empty stage passes the version through (SOAK-5): it soaks for no time, judged by its checks
    empty = not stage.members and not stage.no_partition
    run.soak_end = state.now + (0.0 if empty else soak_seconds(state, stage, run.qualified))
    soaking = StageState.FORCED_SOAKING if run.forced else StageState.SOAKING
    transition(state, run, soaking, StageReason.RESUMED, detail="the whole soak time again (CHK-2)")
    if run.soak_end <= state.now:
        complete(state, run)
    else:
        state.add_run_timer(run.soak_end, "soak", stage=run.stage, track=run.track, rollout_id=run.rollout_id)


def _past_deadline(state: EngineState, run: Run) -> bool:
    return run.started_at is not None and run.started_at + MAX_UPGRADE_TIME <= state.now


def recompute_soak(state: EngineState, run: Run, *, detail: str, unchanged_too: bool = True) -> None:
    """The soak under way ends its new soak time after it began (OPS-2 override, SEQ-7 change): at
    once when that has passed, else at the new end, announced. `unchanged_too`: announce it even
    when the end stays where it was (an override was applied, and says so)."""
    if not run.soaking or run.soak_started is None:
        return
    end = run.soak_started + soak_seconds(state, state.stages[run.stage], run.qualified)
    if end == run.soak_end and not unchanged_too:
        return
    run.soak_end = end
    if end <= state.now:
        complete(state, run)
        return
    state.add_run_timer(end, "soak", stage=run.stage, track=run.track, rollout_id=run.rollout_id)
    reason = StageReason.MAX_UPGRADE_TIME if run.state is StageState.FORCED_SOAKING else StageReason.ALL_UPGRADED
    transition(state, run, run.state, reason, detail=detail)


def complete(state: EngineState, run: Run) -> None:
    """The soak time ended: COMPLETE, unless a soak check has not passed fresh yet (CHK-2; the run
    stays soaking and says which check holds it) or the stage's `after` gate waits (CHK-1)."""
    held = soak_held(state, run) if state.stages[run.stage].spec.checks else None
    if held is not None:
        detail = f"the soak time has elapsed; it ends once {describe(*held)} passes (CHK-2)"
        transition(state, run, run.state, StageReason.CHECK_HOLDS_SOAK, detail=detail)
        state.dirty.add(run.stage)  # its status says which check holds it (STAT-5)
        return
    if not hold_after(state, run):
        finish(state, run, StageReason.SOAK_ELAPSED)


def finish(state: EngineState, run: Run, reason: StageReason, *, detail: str = "") -> None:
    run.finished_at = state.now
    transition(state, run, StageState.COMPLETE, reason, detail=detail)
    qualify_downstream(state, run)


def receive_qualified(state: EngineState, stage: StageRec) -> None:
    """SEQ-7: a stage put behind a track that has already qualified a version of a running rollout
    (appended after it completed) receives that version now, as if it had been there all along."""
    if stage.index == 0:
        return
    upstream = state.stages[stage.index - 1]
    for rollout in list(state.rollouts.values()):  # in creation order
        if rollout.state not in (RolloutState.RUNNING, RolloutState.PAUSED):
            continue
        offers: dict[int, Offer] = {}
        for track in rollout.tracks:
            run = upstream.runs[track].get(rollout.id)
            if run is None or run.state is not StageState.COMPLETE or run.qualified is None:
                continue
            if rollout.id not in stage.runs[track]:
                offers[track] = Offer(rollout.id, version=run.qualified)
        if offers:
            reach_stage(state, stage, offers)


def qualify_downstream(state: EngineState, run: Run) -> None:
    """VER-2: the next stage's same track receives the qualified version."""
    nxt = run.stage + 1
    if nxt < len(state.stages) and run.qualified is not None:
        reach_stage(state, state.stages[nxt], {run.track: Offer(run.rollout_id, version=run.qualified)})
    update_rollout(state, run.rollout_id)


def on_deadline(state: EngineState, run: Run) -> None:
    """SOAK-4: 30 days after the track started, soak anyway."""
    if halted(run):
        return  # CHK-2: nothing qualifies from a halted run; a resume past the deadline force-soaks
    if run.active and run.started_at is not None and run.started_at + MAX_UPGRADE_TIME <= state.now:
        start_soak(state, run, forced=True)


def on_window_timer(state: EngineState, run: Run) -> None:
    """CHK-3: the stage's start window opened; a run still waiting for it goes in."""
    if held_by_window(run) and run.held_offer is not None and _live(state, run):
        admit(state, state.stages[run.stage], [(run, run.held_offer)])


def on_soak_timer(state: EngineState, run: Run) -> None:
    if run.soaking and run.soak_end is not None and run.soak_end <= state.now:
        complete(state, run)


def update_rollout(state: EngineState, rollout_id: str) -> None:
    """STAT-4: a rollout ends when its last run ends; one with nothing to do ends at once, saying so."""
    rollout = state.rollouts[rollout_id]
    if rollout.state in (RolloutState.CANCELLED, RolloutState.COMPLETED):
        return
    last = state.stages[-1]
    if all((r := last.runs[t].get(rollout_id)) is not None and r.state is StageState.COMPLETE for t in rollout.tracks):
        _end(state, rollout_id, "every stage completed")
        return
    runs = [s.runs[t][rollout_id] for s in state.stages for t in rollout.tracks if rollout_id in s.runs[t]]
    # a STUCK run, the first stage's included, waits for the inventory or a version to change
    # (SOAK-4b, VER-5): the rollout stays active (OPS-1) until then, a cancel, or a newer rollout
    if any(not r.terminal for r in runs):
        return
    ended = sorted(
        {f"{state.stages[r.stage].spec.name} {r.state.value}" for r in runs if r.state is not StageState.COMPLETE}
    )
    _end(state, rollout_id, "every run ended" + (f" ({', '.join(ended)})" if ended else ""))


def _end(state: EngineState, rollout_id: str, reason: str) -> None:
    rollout = state.rollouts[rollout_id]
    rollout.state = RolloutState.COMPLETED
    rollout.reason = reason
    state.emit(RolloutTransition(rollout_id=rollout_id, state=rollout.state, reason=reason))
