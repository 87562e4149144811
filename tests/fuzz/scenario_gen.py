"""Random scenario documents in the shared FORMAT, one per seed: fleets, sequences, worlds and scripts.

Why under tests/fuzz and not in the simulation package: the generator exists for the generative
test and `make fuzz`, whose oracle (the shared conformance checker, the engine's audit, a snapshot
twin) is test machinery the product does not ship. What it produces is product input, though: each
scenario is a plain YAML document `rollout simulate` runs, so a failing seed is directly a file.

Every choice comes from one `random.Random(seed)`, so a seed names its scenario for good (as long
as this module does not change). `EVENT_KINDS` weighs the script events drawn; a kind the simulator
does not support yet can be left out of it.

Besides events drawn anywhere in the space, some kinds are shapes aimed at convergence under
change (SEQ-2, SEQ-6a, SEQ-7, SOAK-4b, SOAK-4c, OPS-1): a cluster joining a stage late, when its run
has likely completed, or leaving every stage; a sequence change that appends a stage, changes
nothing, changes a soak or puts a cluster in two stages; a failed first-stage upgrade followed by
a newer release; a cancel before later stages are reached. Two fleet shapes go with them: clusters
that no stage selects until a stage is appended, and a first stage that starts empty. An inventory
change that puts a cluster in two stages is left out of every script (`single_stage`): the shared
checker counts such a cluster in the first of them, where SEQ-2 leaves it in neither, so it would
judge a right engine.

Stage gates (CHK: approvals with approve commands, metric checks with their queries' timelines, start
windows, disruption budgets) are drawn over the scenario by `gate_draws`, from a generator of their own.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

from gate_draws import draw_gates
from single_stage import drop_two_stage_upserts

Doc = dict[str, Any]
Rng = random.Random

MINORS = (29, 30, 31, 32)
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
RECURRENCES = (
    "FREQ=DAILY",
    "FREQ=DAILY;INTERVAL=2",
    "FREQ=WEEKLY;BYDAY=MO,TH",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=SA,SU",
    "FREQ=HOURLY",
    "FREQ=HOURLY;INTERVAL=3",
    "FREQ=MONTHLY;BYMONTHDAY=1,15",
    "FREQ=MONTHLY;BYMONTHDAY=-1",
)
SCOPES = ("NO_UPGRADES", "NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES")
TRACKS = ("controlPlane", "nodes")
SOAKS = ("0d", "1h", "1d", "2d")
# kind -> weight: every kind of the open space weighs 1, so the shapes (about a third of the draws)
# leave most of the script to it
EVENT_KINDS: dict[str, float] = {
    "release": 1,
    "duplicate_release": 1,
    "start_rollout": 1,
    "pause": 1,
    "resume": 1,
    "cancel": 1,
    "soak_override": 1,
    "soak_override_removed": 1,
    "retry": 1,
    "sequence": 1,
    "relabel": 1,
    "move_version": 1,
    "add_cluster": 1,
    "remove_cluster": 1,
    "change_window": 1,
    "change_channel": 1,
    "change_exclusions": 1,
    "join_late": 2,  # SEQ-6a late member, SOAK-4b: a STUCK stage evaluated again
    "leave_all_stages": 1,  # SEQ-6: a member relabelled out of every stage
    "sequence_append": 1.5,  # SEQ-7: a stage appended to a running sequence
    "sequence_same": 1,  # SEQ-7: an accepted change that changes nothing
    "sequence_soak": 1,  # SEQ-7: a changed soak reaches a soak under way
    "sequence_two_stages": 1,  # SEQ-2: refused, a cluster of the inventory in two stages
    "failure_then_newer_release": 1.5,  # SOAK-4c: the newer rollout takes the failed cluster over
    "early_cancel": 1,  # OPS-1: cancelled before the later stages are reached
}
LATE = (3 * 3600, 6 * 3600, 26 * 3600, 52 * 3600, 3 * 86400, 5 * 86400)  # after a stage's run, often
OUT_OF_EVERY_STAGE = "none"  # an env label no stage selects


def version(rng: Rng, minor: int) -> str:
    return f"1.{minor}.{rng.randint(1, 9)}-gke.{rng.randint(1, 3) * 100}"


def newer(rng: Rng, minor: int) -> str:
    """A version of `minor` newer than any `version(rng, minor)`."""
    return f"1.{minor}.{rng.randint(10, 30)}-gke.{rng.randint(1, 9) * 1000}"


def duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v)
    return text or "0s"


def quantity(rng: Rng, top: int = 12) -> int | str:
    return rng.randint(0, top) if rng.random() < 0.5 else f"{rng.choice((0, 5, 10, 25, 34, 50, 100))}%"


def window(rng: Rng) -> Doc:
    """A maintenance window, often defined years before the scenario starts."""
    year = rng.choice((2015, 2019, 2020, 2025)) if rng.random() < 0.6 else 2025
    return {
        "start": f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
        "duration": f"{rng.choice((1, 2, 4, 8))}h",
        "recurrence": rng.choice(RECURRENCES),
    }


def exclusion(rng: Rng) -> Doc:
    begin = rng.randint(0, 6)
    return {
        "start": f"2026-01-{1 + begin:02d}T{rng.randint(0, 23):02d}:00:00Z",
        "end": f"2026-01-{2 + begin + rng.randint(0, 4):02d}T00:00:00Z",
        "scope": rng.choice(SCOPES),
    }


def cluster(rng: Rng, name: str, stages: int) -> Doc:
    minor = rng.choice(MINORS)
    spec: Doc = {
        "name": name,
        "labels": {"env": f"s{rng.randrange(stages)}", "tier": rng.choice("abc")},
        "version": version(rng, minor),
    }
    if rng.random() < 0.3:  # nodes below the control plane: an older patch or the minor before
        spec["nodeVersion"] = version(rng, minor - 1) if rng.random() < 0.5 else f"1.{minor}.0-gke.100"
    if rng.random() < 0.3:  # the group of its stage: SEQ-2 rejects a cluster in two stages
        spec["group"] = f"g{spec['labels']['env'][1:]}"
    if rng.random() < 0.08:
        spec["channel"] = "rapid"
    if rng.random() < 0.2:
        spec["maintenanceWindow"] = window(rng)
    if rng.random() < 0.1:
        spec["exclusions"] = [exclusion(rng)]
    if rng.random() < 0.05:
        spec["deprecatedApiUsage"] = True
    return spec


def strategy(rng: Rng) -> Doc:
    out: Doc = {}
    fields: dict[str, Callable[[], Any]] = {
        "maxNew": lambda: rng.randint(1, 60),
        "maxUnavailable": lambda: quantity(rng),
        "maxUnavailablePartitions": lambda: quantity(rng, 2),
        "autoPartitionSize": lambda: rng.choice((1, 3, 17, "10%", "25%", "50%")),
        "autoPartitionThreshold": lambda: rng.choice((0, 5, 20, 200)),
        "maxConcurrent": lambda: rng.randint(1, 20),
        "maxFailures": lambda: quantity(rng, 3),
    }
    for key, draw in fields.items():
        if rng.random() < 0.6:
            out[key] = draw()
    if rng.random() < 0.25:  # manual partitions by label, by expression and by cluster group
        out["partitions"] = [
            {"name": "pa", "clusterSelector": {"matchLabels": {"tier": "a"}}},
            {
                "name": "pbc",
                "maxUnavailable": quantity(rng),
                "clusterSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "c"]}]},
            },
        ]
        if rng.random() < 0.3:
            out["partitions"].insert(0, {"name": "grouped", "clusterGroup": "g0"})
    return out


def stage(rng: Rng, index: int, clusters: list[Doc]) -> Doc:
    name = f"s{index}"
    out: Doc = {"name": name, "soak": rng.choice(SOAKS)}
    how = rng.random()
    if how < 0.5:
        out["clusterSelector"] = {"matchLabels": {"env": name}}
    elif how < 0.7:
        out["clusterSelector"] = {"matchExpressions": [{"key": "env", "operator": "In", "values": [name]}]}
    elif how < 0.85:
        out["clusterNames"] = [c["name"] for c in clusters if c["labels"]["env"] == name][:40]
    else:
        out["clusterGroup"] = f"g{index}"
    if rng.random() < 0.3:
        out["rolloutStrategy"] = strategy(rng)
    elif rng.random() < 0.5:
        out["rolloutStrategy"] = {"maxUnavailable": quantity(rng), "maxNew": rng.randint(1, 30)}
    return out


def sequence(rng: Rng, stages: int, clusters: list[Doc]) -> Doc:
    return {"name": "main", "channel": "regular", "stages": [stage(rng, i, clusters) for i in range(stages)]}


def offered(rng: Rng, minor: int, ctx: Doc) -> str:
    """A version no release or start of the scenario offered before: the report names a batch by
    its version only, so a version two releases share would leave its release unknown."""
    while (text := newer(rng, minor)) in ctx["offered"]:
        pass
    ctx["offered"].add(text)
    return text


def newest(rng: Rng, minor: int, ctx: Doc) -> str:
    """A version of `minor` newer than every version offered so far (a newer release, SOAK-4c)."""
    patches = [int(v.split(".")[2].split("-")[0]) for v in ctx["offered"] if v.startswith(f"1.{minor}.")]
    text = f"1.{minor}.{max(patches, default=30) + rng.randint(1, 3)}-gke.{rng.randint(1, 9) * 1000}"
    ctx["offered"].add(text)
    return text


def release(rng: Rng, ctx: Doc) -> Doc:
    minors = sorted(ctx["minors"])
    chosen = sorted(rng.sample(minors, rng.randint(1, len(minors))))
    return {"channel": "regular", "targets": {f"1.{m}": offered(rng, m + rng.randint(0, 1), ctx) for m in chosen}}


def script_event(rng: Rng, kind: str, ctx: Doc) -> Doc | None:
    """One script entry of `kind`; `ctx` holds the fleet, stages and releases drawn so far. An entry
    may name its own time (`at`, seconds); otherwise `moment` draws it."""
    if kind in SHAPES:
        return SHAPES[kind](rng, ctx)
    clusters: list[Doc] = ctx["clusters"]
    names = [c["name"] for c in clusters]
    stages: int = ctx["stages"]
    if kind == "release":
        spec = release(rng, ctx)
        if rng.random() < 0.5:
            spec["id"] = f"rel-{len(ctx['releases'])}"
        ctx["releases"].append(spec)
        return {"releaseTarget": spec}
    if kind == "duplicate_release":  # START-4: the same event again, known by its id
        delivered = [r for r in ctx["releases"] if "id" in r]
        return {"releaseTarget": copy.deepcopy(rng.choice(delivered))} if delivered else None
    if kind == "start_rollout":
        tracks = rng.choice((["controlPlane"], ["nodes"], ["controlPlane", "nodes"]))
        version = offered(rng, rng.choice(sorted(ctx["minors"])) + 1, ctx)
        return {"startRollout": {"version": version, "tracks": tracks}}
    if kind in ("pause", "resume", "cancel"):
        return {"command": {kind: {}}}
    if kind in ("soak_override", "soak_override_removed"):
        if not ctx["releases"]:
            return None
        target = rng.choice(list(rng.choice(ctx["releases"])["targets"].values()))
        override: Doc = {"stage": f"s{rng.randrange(stages)}", "version": target}
        if kind == "soak_override":
            override["soak"] = rng.choice(("0d", "1h", "3d"))
        return {"command": {"soakOverride": override}}
    if kind == "retry":
        which = rng.random()
        spec = {"cluster": rng.choice(names)} if which < 0.5 else {"stage": f"s{rng.randrange(stages)}"}
        return {"command": {"retry": spec if which < 0.8 else {}}}
    if kind == "sequence":
        changed = sequence(rng, max(1, stages + rng.choice((-1, 0, 0, 1))), clusters)
        return {"sequence": changed}
    if kind == "add_cluster":
        spec = cluster(rng, f"new-{ctx['added']:03d}", stages)
        ctx["added"] += 1
        clusters.append(spec)
        return {"inventory": {"upsert": spec}}
    if not clusters:
        return None
    victim = rng.choice(clusters)
    if kind == "remove_cluster":
        return {"inventory": {"remove": victim["name"]}}
    changed = {**victim, "labels": dict(victim["labels"])}
    if kind == "change_channel":  # SEQ-3: off the sequence's channel, or back onto it
        changed["channel"] = "regular" if victim.get("channel") == "rapid" else "rapid"
    elif kind == "change_exclusions":
        changed["exclusions"] = [exclusion(rng)] if rng.random() < 0.7 else []
        changed["deprecatedApiUsage"] = rng.random() < 0.3
    elif kind == "relabel":
        changed["labels"]["env"] = f"s{rng.randrange(stages + 1)}"  # s{stages}: out of every stage
        if "group" in changed:
            changed["group"] = f"g{changed['labels']['env'][1:]}"
    elif kind == "move_version":
        minor = int(victim["version"].split(".")[1])
        changed["version"] = newer(rng, minor)
        changed.pop("nodeVersion", None)
    else:
        changed["maintenanceWindow"] = window(rng)
    return {"inventory": {"upsert": changed}}


def join_late(rng: Rng, ctx: Doc) -> Doc:
    """A cluster (new, or one of the fleet relabelled) joins a stage, mostly the first, late enough
    that the stage's run has often completed; on a minor the first release targets, so it has an
    upgrade to get (SEQ-6a: a late member; SOAK-4b: a STUCK stage is evaluated again)."""
    stages: int = ctx["stages"]
    index = 0 if rng.random() < 0.6 else rng.randrange(stages)
    env = f"s{index}"
    outside = [c for c in ctx["clusters"] if c["labels"]["env"] != env]
    if outside and rng.random() < 0.5:
        victim = rng.choice(outside)
        joining = {**victim, "labels": {**victim["labels"], "env": env}}
    else:
        targeted = sorted(int(m.split(".")[1]) for m in ctx["releases"][0]["targets"])
        joining = cluster(rng, f"new-{ctx['added']:03d}", stages)
        ctx["added"] += 1
        ctx["clusters"].append(joining)
        joining["labels"]["env"] = env
        joining["version"] = version(rng, rng.choice(targeted))
        joining.pop("nodeVersion", None)
    if "group" in joining:
        joining["group"] = f"g{index}"
    return {"at": _before_the_end(rng.choice(LATE), ctx), "inventory": {"upsert": joining}}


def leave_all_stages(rng: Rng, ctx: Doc) -> Doc | None:
    """A member relabelled out of every stage (SEQ-6), at any moment."""
    if not ctx["clusters"]:
        return None
    victim = rng.choice(ctx["clusters"])
    leaving = {k: v for k, v in victim.items() if k != "group"}
    leaving["labels"] = {**victim["labels"], "env": OUT_OF_EVERY_STAGE}
    return {"inventory": {"upsert": leaving}}


def sequence_append(rng: Rng, ctx: Doc) -> Doc:
    """The sequence in force at the start with one stage more at its end (SEQ-7); it selects the
    clusters no stage did (the fleet's spare ones), if any."""
    changed = copy.deepcopy(ctx["sequence"])
    changed["stages"].append(stage(rng, len(changed["stages"]), ctx["clusters"]))
    return {"sequence": changed}


def sequence_same(rng: Rng, ctx: Doc) -> Doc:
    """The sequence in force at the start, again: a change that changes nothing (SEQ-7)."""
    return {"sequence": copy.deepcopy(ctx["sequence"])}


def sequence_soak(rng: Rng, ctx: Doc) -> Doc:
    """The start's sequence with one stage's soak changed, often while it soaks (SEQ-7, OPS-2)."""
    changed = copy.deepcopy(ctx["sequence"])
    chosen = rng.choice(changed["stages"])
    chosen["soak"] = rng.choice([s for s in (*SOAKS, "3d") if s != chosen["soak"]])
    return {"at": rng.choice((1200, 3600, 7200, 26 * 3600)), "sequence": changed}


def sequence_two_stages(rng: Rng, ctx: Doc) -> Doc:
    """The start's sequence with one stage also selecting another stage's label (or, with one stage,
    a stage appended that names the first one's clusters): SEQ-2 refuses it with that reason."""
    changed = copy.deepcopy(ctx["sequence"])
    stages = changed["stages"]
    if len(stages) == 1:
        names = [c["name"] for c in ctx["clusters"] if c["labels"]["env"] == "s0"]
        stages.append({"name": "s1", "clusterNames": names[: rng.randint(1, 3)] or ["c-000"]})
        return {"sequence": changed}
    one, other = rng.sample(range(len(stages)), 2)
    for key in ("clusterSelector", "clusterNames", "clusterGroup"):
        stages[one].pop(key, None)
    both = [f"s{one}", f"s{other}"]
    stages[one]["clusterSelector"] = {"matchExpressions": [{"key": "env", "operator": "In", "values": both}]}
    return {"sequence": changed}


def failure_then_newer_release(rng: Rng, ctx: Doc) -> Doc:
    """A first-stage cluster's upgrade fails, then a release newer on every minor arrives (SOAK-4c:
    the newer rollout takes the failed cluster over, and a run that still upgrades clusters of its
    own goes on to soak)."""
    first = [c for c in ctx["clusters"] if c["labels"]["env"] == "s0"]
    targeted = [c for c in first if _minor_key(c["version"]) in ctx["releases"][0]["targets"]]
    if targeted or first:
        ctx["failures"].append({"cluster": rng.choice(targeted or first)["name"], "track": rng.choice(TRACKS)})
    targets = {}
    for m in sorted(ctx["minors"]):
        key = f"1.{m}"
        earlier = [int(r["targets"][key].split(".")[1]) for r in ctx["releases"] if key in r["targets"]]
        targets[key] = newest(rng, max([m + int(rng.random() < 0.3), *earlier]), ctx)
    spec = {"channel": "regular", "targets": targets}
    ctx["releases"].append(spec)
    return {"at": rng.choice((600, 1800, 3600, 7200, 4 * 3600, 86400)), "releaseTarget": spec}


def early_cancel(rng: Rng, ctx: Doc) -> Doc:
    """A cancel while the first stage still runs: later stages were never reached (OPS-1)."""
    return {"at": rng.choice((60, 300, 900, 1800, 3600)), "command": {"cancel": {}}}


SHAPES: dict[str, Callable[[Rng, Doc], Doc | None]] = {
    "join_late": join_late,
    "leave_all_stages": leave_all_stages,
    "sequence_append": sequence_append,
    "sequence_same": sequence_same,
    "sequence_soak": sequence_soak,
    "sequence_two_stages": sequence_two_stages,
    "failure_then_newer_release": failure_then_newer_release,
    "early_cancel": early_cancel,
}


def _minor_key(text: str) -> str:
    return ".".join(text.split(".")[:2])


def _before_the_end(at: int, ctx: Doc) -> int:
    return min(at, ctx["until"] - 3600)


def spare_and_empty(rng: Rng, clusters: list[Doc], stages: int) -> None:
    """Fleet shapes: some clusters that no stage selects (until a stage is appended for them, SEQ-7),
    and now and then a first stage that starts empty (SOAK-4b: STUCK until a cluster joins; OPS-1:
    a STUCK rollout can be cancelled)."""
    if rng.random() < 0.3:
        for c in rng.sample(clusters, rng.randint(1, max(1, len(clusters) // 5))):
            _move(c, stages)
    if rng.random() < 0.08:
        for c in clusters:
            if c["labels"]["env"] == "s0":
                _move(c, rng.randint(1, stages))


def _move(c: Doc, index: int) -> None:
    c["labels"]["env"] = f"s{index}"
    if "group" in c:
        c["group"] = f"g{index}"


def moment(rng: Rng, until: int) -> int:
    """When a script event happens: often while the first upgrades run, sometimes any time."""
    if rng.random() < 0.5:
        return rng.choice((0, 60, 300, 600, 601, 1200, 1800, 3600, 5400))
    return rng.randrange(0, until)


def twin_point(seed: int) -> int:
    """Before which decision the oracle reloads the state of `seed`'s run (a random one, fixed per seed)."""
    return random.Random(f"twin-{seed}").randint(1, 24)


def generate(seed: int, *, kinds: dict[str, float] = EVENT_KINDS) -> Doc:
    """The scenario document of `seed`."""
    rng = random.Random(seed)
    stages = rng.randint(1, 5)
    size = rng.randint(5, 40) if rng.random() < 0.8 else rng.randint(41, 200)
    clusters = [cluster(rng, f"c-{i:03d}", stages) for i in range(size)]
    spare_and_empty(rng, clusters, stages)
    minors = {int(c["version"].split(".")[1]) for c in clusters}
    until = rng.choice((2, 5, 10, 20)) * 86400
    first = sequence(rng, stages, clusters)
    ctx: Doc = {"clusters": list(clusters), "stages": stages, "minors": minors, "releases": [], "added": 0}
    ctx.update(offered=set(), sequence=first, until=until, failures=[])
    events: list[Doc] = [{"at": 0, "releaseTarget": _first_release(rng, ctx)}]
    names, weights = list(kinds), list(kinds.values())
    for _ in range(rng.randint(0, 8)):
        entry = script_event(rng, rng.choices(names, weights)[0], ctx)
        if entry is not None:
            at = entry.pop("at") if "at" in entry else moment(rng, until)
            events.append({"at": at, **entry})
    metrics = draw_gates(seed, sequence=first, clusters=clusters, events=events, until=until)
    releases_at = {e["at"] for e in events if "releaseTarget" in e or "startRollout" in e}
    for entry in events:
        # A command at the very instant of a release: whether it applies to that release's rollout
        # hangs on the order inside the instant, which the report does not show. A second later.
        if "command" in entry and entry["at"] in releases_at:
            entry["at"] += 1
    events.sort(key=lambda e: e["at"])  # stable: same-time entries keep their drawn order
    events = drop_two_stage_upserts(clusters, first, events)
    for entry in events:
        entry["at"] = duration(entry["at"])
    names = [c["name"] for c in clusters]
    failures = [{"cluster": n, "track": rng.choice(TRACKS)} for n in rng.choices(names, k=rng.randint(0, 3))]
    return {
        "name": f"fuzz-{seed}",
        "clusters": clusters,
        "sequence": first,
        "simulation": {
            "upgradeDuration": {"controlPlane": rng.choice(("5m", "10m", "1h")), "nodes": rng.choice(("10m", "30m"))},
            "readyAfter": rng.choice(("0s", "1m", "10m")),
            "notReady": [_spell(rng, n) for n in rng.sample(names, rng.randint(0, min(4, len(names))))],
            "failures": failures + ctx["failures"],
            **({"metrics": metrics} if metrics else {}),
        },
        "events": events,
        "until": duration(until),
    }


def _first_release(rng: Rng, ctx: Doc) -> Doc:
    spec = release(rng, ctx)
    ctx["releases"].append(spec)
    return spec


def _spell(rng: Rng, name: str) -> Doc:
    begin = rng.randint(0, 7200)
    return {"cluster": name, "from": duration(begin), "until": duration(begin + rng.randint(60, 86400))}
