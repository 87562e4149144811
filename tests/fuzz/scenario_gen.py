"""Random scenario documents in the shared FORMAT, one per seed: fleets, sequences, worlds and scripts.

Why under tests/fuzz and not in the simulation package: the generator exists for the generative
test and `make fuzz`, whose oracle (the shared conformance checker, the engine's audit, a snapshot
twin) is test machinery the product does not ship. What it produces is product input, though: each
scenario is a plain YAML document `rollout simulate` runs, so a failing seed is directly a file.

Every choice comes from one `random.Random(seed)`, so a seed names its scenario for good (as long
as this module does not change). `EVENT_KINDS` lists the script events drawn; a kind the simulator
does not support yet can be left out of it.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from typing import Any

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
EVENT_KINDS = (
    "release",
    "duplicate_release",
    "start_rollout",
    "pause",
    "resume",
    "cancel",
    "soak_override",
    "soak_override_removed",
    "retry",
    "sequence",
    "relabel",
    "move_version",
    "add_cluster",
    "remove_cluster",
    "change_window",
    "change_channel",
    "change_exclusions",
)


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
    out: Doc = {"name": name, "soak": rng.choice(("0d", "1h", "1d", "2d"))}
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


def release(rng: Rng, ctx: Doc) -> Doc:
    minors = sorted(ctx["minors"])
    chosen = sorted(rng.sample(minors, rng.randint(1, len(minors))))
    return {"channel": "regular", "targets": {f"1.{m}": offered(rng, m + rng.randint(0, 1), ctx) for m in chosen}}


def script_event(rng: Rng, kind: str, ctx: Doc) -> Doc | None:
    """One script entry of `kind`; `ctx` holds the fleet, stages and releases drawn so far."""
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


def moment(rng: Rng, until: int) -> int:
    """When a script event happens: often while the first upgrades run, sometimes any time."""
    if rng.random() < 0.5:
        return rng.choice((0, 60, 300, 600, 601, 1200, 1800, 3600, 5400))
    return rng.randrange(0, until)


def twin_point(seed: int) -> int:
    """Before which decision the oracle reloads the state of `seed`'s run (a random one, fixed per seed)."""
    return random.Random(f"twin-{seed}").randint(1, 24)


def generate(seed: int, *, kinds: tuple[str, ...] = EVENT_KINDS) -> Doc:
    """The scenario document of `seed`."""
    rng = random.Random(seed)
    stages = rng.randint(1, 5)
    size = rng.randint(5, 40) if rng.random() < 0.8 else rng.randint(41, 200)
    clusters = [cluster(rng, f"c-{i:03d}", stages) for i in range(size)]
    minors = {int(c["version"].split(".")[1]) for c in clusters}
    until = rng.choice((2, 5, 10, 20)) * 86400
    ctx: Doc = {"clusters": list(clusters), "stages": stages, "minors": minors, "releases": [], "added": 0}
    ctx["offered"] = set()
    events: list[Doc] = [{"at": 0, "releaseTarget": _first_release(rng, ctx)}]
    for _ in range(rng.randint(0, 8)):
        entry = script_event(rng, rng.choice(kinds), ctx)
        if entry is not None:
            events.append({"at": moment(rng, until), **entry})
    releases_at = {e["at"] for e in events if "releaseTarget" in e or "startRollout" in e}
    for entry in events:
        # A command at the very instant of a release: whether it applies to that release's rollout
        # hangs on the order inside the instant, which the report does not show. A second later.
        if "command" in entry and entry["at"] in releases_at:
            entry["at"] += 1
    events.sort(key=lambda e: e["at"])  # stable: same-time entries keep their drawn order
    for entry in events:
        entry["at"] = duration(entry["at"])
    names = [c["name"] for c in clusters]
    return {
        "name": f"fuzz-{seed}",
        "clusters": clusters,
        "sequence": sequence(rng, stages, clusters),
        "simulation": {
            "upgradeDuration": {"controlPlane": rng.choice(("5m", "10m", "1h")), "nodes": rng.choice(("10m", "30m"))},
            "readyAfter": rng.choice(("0s", "1m", "10m")),
            "notReady": [_spell(rng, n) for n in rng.sample(names, rng.randint(0, min(4, len(names))))],
            "failures": [{"cluster": n, "track": rng.choice(TRACKS)} for n in rng.choices(names, k=rng.randint(0, 3))],
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
