"""The command driver: exact argv, no shell, strict names, timeouts and stderr in errors."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from rollout_common.errors import InvalidInputError
from rollout_common.status import Track
from rollout_executor.drivers.command import CommandDriver
from rollout_executor.settings import CommandDriverSettings
from rollout_executor.target import UpgradeTarget

# One loop for the whole session, as the async fixtures use (pyproject).
pytestmark = pytest.mark.asyncio(loop_scope="session")

# Run as `python -c CODE <out file> cluster track version`: writes its argv as JSON.
_RECORD_ARGV = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[1:]))"


def _driver(code: str, *args: str, timeout_s: float = 10.0) -> CommandDriver:
    return CommandDriver(
        CommandDriverSettings(executable=sys.executable, args=("-c", code, *args), timeout_s=timeout_s)
    )


def _target(cluster: str = "prod-eu.1", version: str = "1.31.2-gke.100") -> UpgradeTarget:
    return UpgradeTarget(cluster=cluster, track=Track.NODES, version=version)


async def test_the_fencing_token_reaches_the_program_as_an_environment_variable(tmp_path: Path) -> None:
    out = tmp_path / "token"
    code = "import os, sys; open(sys.argv[1], 'w').write(os.environ['ROLLOUT_FENCING_TOKEN'])"
    outcome = await _driver(code, str(out)).upgrade(_target(), fencing_token=42)
    assert outcome.succeeded
    assert out.read_text() == "42"


async def test_argv_is_passed_exactly(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    outcome = await _driver(_RECORD_ARGV, str(out)).upgrade(_target(), fencing_token=1)
    assert outcome.succeeded
    assert json.loads(out.read_text()) == [str(out), "prod-eu.1", "nodes", "1.31.2-gke.100"]


@pytest.mark.parametrize(
    ("cluster", "version"),
    [
        ("c1; rm -rf /", "1.31.2"),
        ("$(touch pwned)", "1.31.2"),
        ("-rf", "1.31.2"),
        ("c" * 254, "1.31.2"),
        ("c1", "1.31.2; reboot"),
        ("c1", " 1.31.2"),
        ("c1", "--help"),
    ],
)
async def test_unsafe_names_are_rejected_before_anything_runs(tmp_path: Path, cluster: str, version: str) -> None:
    out = tmp_path / "argv.json"
    outcome = await _driver(_RECORD_ARGV, str(out)).upgrade(_target(cluster, version), fencing_token=1)
    assert not outcome.succeeded
    assert outcome.error is not None and outcome.error.startswith("rejected:")
    assert not out.exists()


async def test_a_slow_upgrade_times_out_and_is_killed() -> None:
    started = time.monotonic()
    outcome = await _driver("import time; time.sleep(30)", timeout_s=0.5).upgrade(_target(), fencing_token=1)
    assert (outcome.succeeded, outcome.error) == (False, "timed out after 0.5 s")
    assert time.monotonic() - started < 5


async def test_a_non_zero_exit_carries_the_last_lines_of_stderr() -> None:
    code = "import sys; [print(f'line {i}', file=sys.stderr) for i in range(9)]; sys.exit(3)"
    outcome = await _driver(code).upgrade(_target(), fencing_token=1)
    assert not outcome.succeeded
    assert outcome.error == "exit code 3: " + "\n".join(f"line {i}" for i in range(4, 9))


async def test_a_missing_executable_is_a_failed_upgrade(tmp_path: Path) -> None:
    driver = CommandDriver(CommandDriverSettings(executable=str(tmp_path / "absent")))
    outcome = await driver.upgrade(_target(), fencing_token=1)
    assert not outcome.succeeded
    assert outcome.error is not None and outcome.error.startswith("cannot run")


async def test_an_empty_executable_is_refused_at_start() -> None:
    with pytest.raises(InvalidInputError):
        CommandDriver(CommandDriverSettings())


FAKE_PROBE = Path(__file__).with_name("fake_probe.py")


def _probing(probe: tuple[str, ...], *, timeout_s: float = 10.0) -> CommandDriver:
    return CommandDriver(CommandDriverSettings(executable="upgrade-cluster", probe=probe, probe_timeout_s=timeout_s))


async def test_the_probe_prints_the_version_a_track_runs(tmp_path: Path) -> None:
    log = tmp_path / "upgrades.log"
    log.write_text("done prod-eu.1 nodes 1.30.9\ndone prod-eu.1 controlPlane 1.31.2\ndone prod-eu.1 nodes 1.31.2\n")
    driver = _probing((sys.executable, str(FAKE_PROBE), str(log)))
    assert await driver.observed_version(_target()) == "1.31.2"
    assert await driver.observed_version(_target("other")) is None  # printed nothing: cannot tell


async def test_a_failing_slow_or_absent_probe_cannot_tell(tmp_path: Path) -> None:
    failing = (sys.executable, "-c", "import sys; print('1.31.2'); sys.exit(2)")
    assert await _probing(failing).observed_version(_target()) is None
    slow = (sys.executable, "-c", "import time; time.sleep(30)")
    started = time.monotonic()
    assert await _probing(slow, timeout_s=0.5).observed_version(_target()) is None
    assert time.monotonic() - started < 5
    assert await _probing((str(tmp_path / "absent"),)).observed_version(_target()) is None
    assert await _probing(()).observed_version(_target()) is None  # no probe configured
    assert await _probing((sys.executable, str(FAKE_PROBE))).observed_version(_target("c1; rm -rf /")) is None


async def test_the_probe_gets_cluster_and_track_after_its_own_args(tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    code = "import json, sys; open(sys.argv[1], 'w').write(json.dumps(sys.argv[1:])); print('v1.31.2')"
    assert await _probing((sys.executable, "-c", code, str(out))).observed_version(_target()) == "v1.31.2"
    assert json.loads(out.read_text()) == [str(out), "prod-eu.1", "nodes"]
