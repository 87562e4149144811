"""The options several commands share, and the argument types they use.

Connection options (each with the environment variable that gives its default), the wait for the
planner's acknowledgement, and naming the rollout a command is for (OPS-5).
"""

from __future__ import annotations

import argparse
import os

TARGET_HELP = (
    "Name the rollout with --rollout ID (as `rollout status` lists it), or say --all for every active "
    "rollout: a command never applies to every rollout by default (OPS-5)."
)


ACK_HELP = (
    "The command waits for the planner's acknowledgement on the progress topic and prints whether it "
    "was accepted or rejected, and why (OPS-3); --no-wait only publishes it."
)


def target_options(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--rollout", metavar="ID", help="the rollout, e.g. prod-1 (`rollout status` lists them)")
    target.add_argument("--all", action="store_true", help="every active rollout, said explicitly, e.g. --all")


def ack_options() -> argparse.ArgumentParser:
    acked = argparse.ArgumentParser(add_help=False)
    acked.add_argument(
        "--no-wait", action="store_true", help="publish and exit 0 without waiting for the planner's answer"
    )
    acked.add_argument(
        "--timeout",
        type=positive_float,
        default=float(os.environ.get("ROLLOUT_ACK_TIMEOUT_S", "30")),
        metavar="SECONDS",
        help="how long to wait for the answer, e.g. --timeout 60 (env ROLLOUT_ACK_TIMEOUT_S; default 30)",
    )
    return acked


# The options every command that reaches Kafka or Redis takes: (flag, environment variable that
# gives its default, default without it, help). The help names the variable.
CONNECTION_OPTIONS = (
    ("--bootstrap", "ROLLOUT_KAFKA_BOOTSTRAP", "localhost:9092",
     "Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092"),
    ("--redis", "ROLLOUT_REDIS_URL", "redis://localhost:6379/0", "Redis URL, e.g. redis://redis:6379/0"),
    ("--topic-prefix", "ROLLOUT_TOPIC_PREFIX", "", "put before every topic and group name, e.g. staging."),
    ("--namespace", "ROLLOUT_REDIS_NAMESPACE", "rollout", "the planner's Redis key namespace, e.g. rollout"),
    ("--source", "ROLLOUT_SOURCE", "rollout-cli", "ce_source of what this command publishes, e.g. ci/pipeline-42"),
)  # fmt: skip


def common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    for flag, variable, fallback, what in CONNECTION_OPTIONS:
        common.add_argument(flag, default=os.environ.get(variable, fallback), help=f"{what} (env {variable})")
    return common


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, not {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, not {text!r}")
    return value


__all__ = [
    "ACK_HELP",
    "CONNECTION_OPTIONS",
    "TARGET_HELP",
    "ack_options",
    "common_options",
    "positive_float",
    "positive_int",
    "target_options",
]
