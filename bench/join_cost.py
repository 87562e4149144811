"""Cost of inventory joins during a rollout: one join at stages of 1k to 100k members, and 20,000 joins.

Each join is one `InventoryChange` upsert of a new cluster, one `decide` call, while the stage's
rollout runs (released, half of the handed-out clusters succeeded, half of those ready). New names
fall anywhere in the stage's name order (PART-4 orders partitions by name), so a join moves
partition boundaries as a real one does. Fleet recomputes a stage's partitions on every change,
so one join costs in proportion to the stage; ours must not.

    python -m bench.join_cost --members 10000 --joins 500 --json     # cost of one join at 10k members
    python -m bench.join_cost --members 1000 --joins 20000 --json    # 20,000 joins during a rollout
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.engine_cost import FROM_VERSION, NOW, fleet, mid_rollout, sequence
from rollout_common.events import InventoryChange
from rollout_common.fleet import Cluster
from rollout_planner.engine import decide, new_state

ROOT = Path(__file__).resolve().parent.parent
STAGE_SIZES = (1_000, 10_000, 100_000)
JOINS_PER_SIZE = 500
MANY_JOINS = 20_000
MANY_JOINS_FROM = 1_000  # members before the 20,000 joins
MANY_JOINS_LIMIT_S = 10.0
FLAT_LIMIT = 2.0  # one join at 100k members costs at most this many times one at 1k


@dataclass
class JoinResult:
    members: int  # before the joins
    joins: int
    total_s: float  # process CPU time of all the joins' decide calls
    joins_per_s: float
    mean_us: float
    p50_us: float
    p99_us: float
    first_tenth_us: float  # mean of the first tenth of the joins, and of the last: a cost that grows
    last_tenth_us: float  # with the stage shows here


def joins(count: int, seed: int) -> list[InventoryChange]:
    """New clusters whose names fall all over the existing ones' order (`c-NNNNNNN`)."""
    rng = random.Random(seed)
    return [
        InventoryChange(
            action="upsert",
            cluster=Cluster(
                name=f"c-{rng.randrange(10_000_000):07d}-join-{i}", labels={"env": "prod"}, version=FROM_VERSION
            ),
        )
        for i in range(count)
    ]


def measure(members: int, count: int, *, seed: int = 7) -> JoinResult:
    state = new_state(sequence(), fleet(members))
    mid_rollout(state, NOW)
    events = joins(count, seed)
    costs: list[int] = []
    now = NOW + 700
    started = time.process_time()
    for event in events:
        begin = time.process_time_ns()
        decide(state, event, now)
        costs.append(time.process_time_ns() - begin)
    total = time.process_time() - started
    assert len(state.stages[0].members) + len(state.stages[0].no_partition) == members + count
    ordered = sorted(costs)
    tenth = max(1, count // 10)
    return JoinResult(
        members=members,
        joins=count,
        total_s=total,
        joins_per_s=count / total if total else float("inf"),
        mean_us=sum(costs) / count / 1000,
        p50_us=ordered[count // 2] / 1000,
        p99_us=ordered[min(count - 1, int(count * 0.99))] / 1000,
        first_tenth_us=sum(costs[:tenth]) / tenth / 1000,
        last_tenth_us=sum(costs[-tenth:]) / tenth / 1000,
    )


def run(members: int, count: int, *, isolate: bool) -> dict[str, Any]:
    if not isolate:
        return asdict(measure(members, count))
    cmd = [sys.executable, "-m", "bench.join_cost", "--members", str(members), "--joins", str(count), "--json"]
    done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout))


def collect(
    sizes: tuple[int, ...] = STAGE_SIZES, *, per_size: int = JOINS_PER_SIZE, many: int = MANY_JOINS, isolate: bool
) -> dict[str, Any]:
    return {
        "per_size": [run(size, per_size, isolate=isolate) for size in sizes],
        "many": run(MANY_JOINS_FROM, many, isolate=isolate),
        "limit_s": MANY_JOINS_LIMIT_S * many / MANY_JOINS,  # the limit scaled to the joins run (quick mode)
    }


def verdicts(data: dict[str, Any]) -> list[tuple[str, bool, str]]:
    many = data["many"]
    sizes = data["per_size"]
    small, large = sizes[0], sizes[-1]
    ratio = large["mean_us"] / small["mean_us"]
    return [
        (
            f"{many['joins']:,} inventory joins during a rollout within {data['limit_s']:g} s",
            many["total_s"] <= data["limit_s"],
            f"{many['total_s']:.2f} s CPU from {many['members']:,} members ({many['joins_per_s']:,.0f} joins/s; "
            f"first tenth {many['first_tenth_us']:,.0f} µs per join, last tenth {many['last_tenth_us']:,.0f} µs)",
        ),
        (
            f"one join at {large['members']:,} members within {FLAT_LIMIT:g}x of one at {small['members']:,}",
            ratio <= FLAT_LIMIT,
            ", ".join(f"{r['members']:,}: {r['mean_us']:,.0f} µs (p99 {r['p99_us']:,.0f})" for r in sizes)
            + f" = {ratio:.2f}x",
        ),
    ]


def section(data: dict[str, Any]) -> list[str]:
    lines = [
        "### Inventory joins during a rollout",
        "",
        "One `decide` per join (a new cluster, its name anywhere in the stage's order), while the stage's "
        "rollout runs; process CPU time.",
        "",
        "| members before | joins | total | joins/s | mean per join | p50 | p99 | first tenth | last tenth |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in [*data["per_size"], data["many"]]:
        lines.append(
            f"| {r['members']:,} | {r['joins']:,} | {r['total_s']:.2f} s | {r['joins_per_s']:,.0f} | "
            f"{r['mean_us']:,.0f} µs | {r['p50_us']:,.0f} µs | {r['p99_us']:,.0f} µs | "
            f"{r['first_tenth_us']:,.0f} µs | {r['last_tenth_us']:,.0f} µs |"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1_000)
    parser.add_argument("--joins", type=int, default=JOINS_PER_SIZE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.members, args.joins)
    if args.json:
        print(json.dumps(asdict(result)))
        return
    for key, value in asdict(result).items():
        print(f"{key}: {value:,.2f}" if isinstance(value, float) else f"{key}: {value:,}")


if __name__ == "__main__":
    main()
