"""Kafka's shell tools (`/opt/kafka/bin/kafka-*.sh` in Apache's image) from the jars the local
broker runs on: each script is a small wrapper starting the same Java class the image's script
starts, so a command written for the container runs unchanged but for that path.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from rollout_devenv._java import find_java
from rollout_devenv.kafka import fetch_kafka_jars

IMAGE_BIN = "/opt/kafka/bin/"

# script name -> main class, as in Kafka 4.1's bin/ directory
_TOOLS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups.sh": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-consumer.sh": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-broker-api-versions.sh": "org.apache.kafka.tools.BrokerApiVersionsCommand",
}
# Kafka's own tools configuration logs warnings to stderr, nothing else.
_LOG4J = """status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
"""


def install_tools(bin_dir: Path) -> Path:
    """Write the wrapper scripts into `bin_dir` and return it."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    jars = fetch_kafka_jars(quiet=True)
    log4j = bin_dir / "tools-log4j2.properties"
    log4j.write_text(_LOG4J)
    java = find_java()
    for script, main_class in _TOOLS.items():
        path = bin_dir / script
        jvm = [str(java), "-XX:TieredStopAtLevel=1", f"-Dlog4j2.configurationFile={log4j.as_uri()}", "-cp", f"{jars}/*"]
        path.write_text(f'#!/bin/sh\nexec {shlex.join(jvm)} {main_class} "$@"\n')
        path.chmod(0o755)
    return bin_dir


def in_tools(command: str, bin_dir: Path) -> str:
    """`command` with the image's tool directory replaced by `bin_dir`."""
    return command.replace(IMAGE_BIN, f"{bin_dir}/")
