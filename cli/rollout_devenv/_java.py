"""Finding the Java runtime and Maven that run and fetch the local Kafka broker."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path

from rollout_devenv._proc import DevenvError

# Kafka 4.x brokers need Java 17; newer JDKs on the machine (a Temurin 25 for instance) are not
# what the broker is released and tested on, so they are passed over.
MIN_JAVA = 17
MAX_JAVA = 21


def java_major(java: Path) -> int | None:
    """The feature version of a `java` binary (17 for "17.0.15"), None when it does not run."""
    try:
        done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr)
    if not match:
        return None
    major = int(match.group(1))
    # Java 8 and older call themselves "1.8".
    return int(match.group(2) or 0) if major == 1 else major


def _candidates() -> list[Path]:
    found: list[Path] = []
    if home := os.environ.get("JAVA_HOME"):
        found.append(Path(home) / "bin" / "java")
    # Debian's package, whatever the machine's architecture.
    found += [Path(p) for p in sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*/bin/java"))]
    if on_path := shutil.which("java"):
        # Resolve the update-alternatives links to tell which JDK it really is.
        found.append(Path(on_path).resolve())
    return found


def find_java() -> Path:
    """The first Java 17 to 21 among JAVA_HOME, Debian's OpenJDK 17 and the `java` on PATH."""
    tried: list[str] = []
    for java in dict.fromkeys(_candidates()):
        major = java_major(java) if java.is_file() else None
        if major is not None and MIN_JAVA <= major <= MAX_JAVA:
            return java
        tried.append(f"{java} ({'missing' if major is None else f'Java {major}'})")
    raise DevenvError(
        f"no Java {MIN_JAVA}-{MAX_JAVA} found to run Kafka (tried: {', '.join(tried) or 'nothing'}); "
        "install openjdk-17-jre-headless or point JAVA_HOME at a Java 17"
    )


def java_home(java: Path) -> Path:
    return java.parent.parent


def find_maven() -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevenvError("mvn not found on PATH; install Maven (apt-get install maven) to fetch the Kafka jars")
    return Path(mvn)
