"""`make fuzz SEEDS=N`: run N generated scenarios through the oracle, shrink each failure to a file.

    python tests/fuzz/campaign.py --seeds 2000 [--first 0] [--out build/fuzz] [--jobs 2]

One line per failing seed (its first problem and where the shrunk scenario went; the first seed
of each kind of failure is shrunk, within a time budget), then a short summary: the count by kind,
and a last line `seeds run: N, failures: F, seeds/s: R`. Any line of the shared checker fails its
seed. Exit status 1 when a seed failed. A shrunk scenario runs with `rollout simulate FILE`; the
developer adds its `expect:` (what SPEC says should happen) and keeps it under tests/scenarios/.
Audit and restart problems come from this oracle only (the conformance checker sees the report, not
the engine's state).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from oracle import problems, signature  # noqa: E402
from scenario_gen import generate, twin_point  # noqa: E402
from shrink import Shrinker  # noqa: E402


def same_failure(kind: str, *, twin_at: int) -> Any:
    def still_fails(doc: dict[str, Any]) -> bool:
        return any(signature(p) == kind for p in problems(doc, twin_at=twin_at))

    return still_fails


def shrink_to_file(seed: int, doc: dict[str, Any], problem: str, out: Path, *, seconds: float, twin_at: int) -> Path:
    """Shrink `doc` keeping the kind of `problem`, and write it with a header naming seed and problem."""
    kind = signature(problem)
    small = Shrinker(same_failure(kind, twin_at=twin_at), seconds=seconds).shrink(doc)
    small["name"] = f"fuzz-seed-{seed}"
    left = problems(small, twin_at=twin_at)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"seed-{seed}.yaml"
    header = [
        f"# make fuzz, seed {seed}: {kind}",
        f"# first problem: {(left or [problem])[0][:300]}",
        f"# reload before decision {twin_at}",
        "# add `expect:` (what SPEC says should happen) before keeping it under tests/scenarios/",
    ]
    path.write_text("\n".join(header) + "\n" + as_yaml(small))
    return path


class _PlainDumper(yaml.SafeDumper):
    """No anchors and aliases: a scenario a person edits spells every entry out."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def as_yaml(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_PlainDumper, sort_keys=False, width=120)


def examined(seed: int) -> tuple[int, list[str]]:
    return seed, problems(generate(seed), twin_at=twin_point(seed))


def examinations(seeds: range, *, jobs: int) -> Iterator[tuple[int, list[str]]]:
    """Every seed's problems, in seed order; `jobs` worker processes share them out."""
    if jobs <= 1:
        yield from map(examined, seeds)
        return
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap(examined, seeds, chunksize=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--out", type=Path, default=Path("build/fuzz"), help="where shrunk scenarios go")
    parser.add_argument("--shrink-seconds", type=float, default=20.0, help="shrinking time per failing seed")
    parser.add_argument("--shrink-total", type=float, default=60.0, help="shrinking time over the whole run")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes that run the seeds")
    args = parser.parse_args(argv)
    began = time.monotonic()
    kinds: Counter[str] = Counter()
    shrinking = 0.0
    for seed, found in examinations(range(args.first, args.first + args.seeds), jobs=args.jobs):
        if not found:
            continue
        kind = signature(found[0])
        kinds[kind] += 1
        budget = min(args.shrink_seconds, args.shrink_total - shrinking)
        if kinds[kind] > 1:
            where = "not shrunk (a seed before it failed the same way)"
        elif budget > 0:
            mark = time.monotonic()
            path = shrink_to_file(seed, generate(seed), found[0], args.out, seconds=budget, twin_at=twin_point(seed))
            shrinking += time.monotonic() - mark
            where = f"shrunk to {path}"
        else:
            where = "not shrunk (shrinking time used up)"
        print(f"seed {seed}: {found[0][:160]} -> {where}", flush=True)
    elapsed = time.monotonic() - began
    checking = max(elapsed - shrinking, 1e-9)
    for kind, count in kinds.most_common():
        print(f"  {count} x {kind}")
    print(f"{elapsed:.1f} s in all, {shrinking:.1f} s of it shrinking, {args.jobs} worker process(es)")
    print(f"seeds run: {args.seeds}, failures: {sum(kinds.values())}, seeds/s: {args.seeds / checking:.1f}")
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main())
