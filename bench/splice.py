"""Re-render chosen Kafka sections of docs/benchmarks.md from a partial run, leaving the rest as it is.

A full `make bench` takes about 12 minutes on an idle machine. After a change to the planner path
only, its two benchmarks can be rerun alone and their sections, target rows and missed-target
notes rendered by the same code as `bench.run` (`bench.kafka_report`) and put in place:

    python -m bench.kafka_planner --json > planner.json
    python -m bench.kafka_planner --max-records 5000 --json > planner-alt.json
    python -m bench.decision_latency --trials 1000 --json > latency.json
    python -m bench.health_scaling --workers 1 2 4 --json > health.json
    python -m bench.splice --planner planner.json --planner-alt planner-alt.json --latency latency.json \
        --health health.json

Sections are found by their `## ` / `### ` titles; the run's date and load go beside them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

from bench import kafka_report
from bench.kafka_common import load_average

ROOT = Path(__file__).resolve().parent.parent
PLANNER_TITLE = "## Planner over Kafka: readiness events per second"
LATENCY_TITLE = "## Decision latency: readiness in, stage-advance out"
NEXT_TITLE = "## Executor scaling"
ROLLOUT_TITLE = "## Whole rollout through the real services"


def _between(lines: list[str], start: str, end_prefix: str) -> tuple[int, int]:
    """Index of the line `start` and of the first line after it starting with `end_prefix`."""
    first = lines.index(start)
    for i in range(first + 1, len(lines)):
        if lines[i].startswith(end_prefix):
            return first, i
    return first, len(lines)


def _limit_block(lines: list[str], title: str) -> tuple[int, int] | None:
    if title not in lines:
        return None
    first = lines.index(title)
    for i in range(first + 1, len(lines)):
        if lines[i].startswith(("## ", "### ")):
            return first, i
    return first, len(lines)


def splice(page: str, kafka: dict[str, Any]) -> str:
    lines = page.split("\n")
    fresh = kafka_report.page_lines(kafka, ["bench-latency-kafka.png"])
    start, end = _between(fresh, PLANNER_TITLE, NEXT_TITLE)
    new_sections = fresh[start:end]
    first, last = _between(lines, PLANNER_TITLE, NEXT_TITLE)
    lines[first:last] = new_sections
    if kafka.get("health"):
        health = kafka_report.health_lines(kafka["health"])
        if kafka_report.HEALTH_TITLE in lines:
            first, last = _between(lines, kafka_report.HEALTH_TITLE, "## ")
            lines[first - 1 : last] = health
        else:
            anchor = lines.index(ROLLOUT_TITLE) - 1
            lines[anchor:anchor] = health
    # target rows by their wording: replaced, or added after the latency row
    rows = {
        name.split(" >=")[0].split(" p99")[0]: f"| {name} | {'**met**' if met else '**missed**'} | {detail} |"
        for name, met, detail in kafka_report.verdicts(kafka)
    }
    placed = set()
    for i, line in enumerate(lines):
        for prefix, row in rows.items():
            if line.startswith(f"| {prefix}"):
                lines[i] = row
                placed.add(prefix)
    missing = [row for prefix, row in rows.items() if prefix not in placed]
    if missing:
        after = next(i for i, line in enumerate(lines) if line.startswith("| decision latency"))
        lines[after + 1 : after + 1] = missing
    # missed-target notes: replaced, dropped when now met
    notes = kafka_report.limits_lines(kafka)
    for title in ("### Planner over Kafka", "### Decision latency", "### Health monitor scaling"):
        block = _limit_block(lines, title)
        fresh_block = _limit_block(notes, title)
        replacement = notes[fresh_block[0] : fresh_block[1]] if fresh_block else []
        if block:
            lines[block[0] : block[1]] = replacement
        elif replacement:
            anchor = lines.index("## Closing note") if "## Closing note" in lines else len(lines)
            lines[anchor:anchor] = replacement
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planner", type=Path, required=True, help="bench.kafka_planner --json output")
    parser.add_argument("--planner-alt", type=Path, default=None, help="the same with larger polls")
    parser.add_argument("--latency", type=Path, required=True, help="bench.decision_latency --json output")
    parser.add_argument("--health", type=Path, default=None, help="bench.health_scaling --json output")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--infrastructure", default="given")
    args = parser.parse_args(argv)
    kafka: dict[str, Any] = {
        "planner": json.loads(args.planner.read_text().strip().splitlines()[-1]),
        "latency": json.loads(args.latency.read_text().strip().splitlines()[-1]),
        "executors": [],
        "rollouts": [],
        "infrastructure": args.infrastructure,
        "run": f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, load {load_average()} when rendered",
    }
    if args.health is not None:
        kafka["health"] = json.loads(args.health.read_text().strip().splitlines()[-1])
    if args.planner_alt is not None:
        kafka["planner_alt"] = json.loads(args.planner_alt.read_text().strip().splitlines()[-1])
    images = kafka_report.charts(kafka, args.page.parent)
    args.page.write_text(splice(args.page.read_text(), kafka))
    print(f"wrote {args.page} ({', '.join(images)})")


if __name__ == "__main__":
    main()
