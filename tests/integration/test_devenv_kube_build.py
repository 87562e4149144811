"""One kube-apiserver build per machine, overlapping the suite: `make test` starts it in the
background (`rollout_devenv kube build --background`); whoever needs the binary meanwhile waits
for that build, bounded, and raises it to normal CPU priority. The cache lives in a folder of
the test's own (`ROLLOUT_CACHE_DIR`), so no real build is started or disturbed."""

from __future__ import annotations

import fcntl
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollout_devenv import DevenvError
from rollout_devenv import kube as kube_module
from rollout_devenv.kube import apiserver_home, build_kube_apiserver, kube_version, start_background_build


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ROLLOUT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(kube_module, "_LOCK_POLL_S", 0.05)
    folder = apiserver_home(kube_version())
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def held_lock(home: Path) -> Iterator[object]:
    """The build lock, held as a build in another process holds it."""
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock


def _finish_build(home: Path) -> None:
    (home / "kube-apiserver").write_bytes(b"#!/bin/true\n")
    (home / ".complete").write_text(kube_module._sources_digest() + "\n")


def test_a_built_binary_is_reused_without_building(home: Path) -> None:
    _finish_build(home)
    assert build_kube_apiserver(quiet=True) == home / "kube-apiserver"
    assert start_background_build() == f"kube-apiserver {kube_version()} is built: {home / 'kube-apiserver'}"
    assert not (home / "build.log").exists()


def test_a_waiter_gets_the_binary_the_build_under_way_finishes(home: Path, held_lock: object) -> None:
    def finish() -> None:
        _finish_build(home)
        fcntl.flock(held_lock, fcntl.LOCK_UN)

    timer = threading.Timer(0.5, finish)
    timer.start()
    try:
        assert build_kube_apiserver(quiet=True, wait_s=30.0) == home / "kube-apiserver"
    finally:
        timer.join()
    # It waited and built nothing itself: a build of its own would have written the log.
    assert not (home / "build.log").exists()


def test_a_build_that_does_not_finish_in_time_fails_with_its_log(home: Path, held_lock: object) -> None:
    (home / "build.log").write_text("go: downloading k8s.io/kubernetes v1.34.2\n")
    with pytest.raises(DevenvError) as raised:
        build_kube_apiserver(quiet=True, wait_s=0.3)
    assert str(raised.value) == (
        f"the kube-apiserver build under way did not finish within 0 s; see {home / 'build.log'}"
    )
    assert "go: downloading k8s.io/kubernetes v1.34.2" in raised.value.full_text()


def test_a_second_background_start_leaves_the_build_under_way_alone(home: Path, held_lock: object) -> None:
    assert start_background_build() == (f"kube-apiserver {kube_version()} is being built (log: {home / 'build.log'})")


def test_a_waiter_raises_the_build_to_normal_priority(home: Path, held_lock: object) -> None:
    # A stand-in for `nice -n 19 go build` in a session of its own, as spawn() starts it.
    builder = subprocess.Popen(["nice", "-n", "19", "sleep", "60"], start_new_session=True)
    try:
        (home / "build.pid").write_text(f"{builder.pid}\n")
        with pytest.raises(DevenvError):
            build_kube_apiserver(quiet=True, wait_s=0.2)
        niceness = os.getpriority(os.PRIO_PROCESS, builder.pid)
    finally:
        builder.kill()
        builder.wait()
    # Lowering a niceness takes root (CAP_SYS_NICE); without it the build keeps its pace.
    assert niceness == (0 if os.geteuid() == 0 else 19)


def test_the_background_build_runs_detached_and_a_waiter_gets_its_binary(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in `go` that "builds" by writing its -o file after a moment, and records its argv.
    tools = tmp_path / "bin"
    tools.mkdir()
    fake_go = tools / "go"
    fake_go.write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path / "go-argv"}\nsleep 1\n'
        'while [ "$1" != "-o" ]; do shift; done\nprintf "built" > "$2"\n'
    )
    fake_go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")

    said = start_background_build()

    assert said == (
        f"building kube-apiserver {kube_version()} in the background (log: {home / 'build.log'}); "
        "the Kubernetes tests, which run last, wait for it"
    )
    assert build_kube_apiserver(quiet=True, wait_s=60.0).read_bytes() == b"built"
    argv = (tmp_path / "go-argv").read_text().split()
    assert argv[:2] == ["build", "-trimpath"]
    assert not (home / "build.pid").exists()


def test_a_waiter_whose_build_failed_says_so_without_building_again(home: Path, held_lock: object) -> None:
    (home / "build.log").write_text("main.go:3:2: no required module provides package k8s.io/nope\n")
    (home / ".failed").write_text(kube_module._sources_digest() + "\n")
    timer = threading.Timer(0.3, lambda: fcntl.flock(held_lock, fcntl.LOCK_UN))
    timer.start()
    try:
        with pytest.raises(DevenvError) as raised:
            build_kube_apiserver(quiet=True, wait_s=30.0)
    finally:
        timer.join()
    assert str(raised.value) == f"the kube-apiserver build this waited for failed; see {home / 'build.log'}"
    assert "no required module provides package k8s.io/nope" in raised.value.full_text()
    assert "started" not in (home / "build.log").read_text()


def test_a_waiter_for_a_build_of_other_sources_builds_its_own(
    home: Path, held_lock: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """go.mod changed while a build of the old sources ran: its result, good or bad, is not ours."""
    (home / ".failed").write_text("digest-of-the-old-go-mod\n")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "go").write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\nprintf "new" > "$2"\n')
    (tools / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    timer = threading.Timer(0.3, lambda: fcntl.flock(held_lock, fcntl.LOCK_UN))
    timer.start()
    try:
        assert build_kube_apiserver(quiet=True, wait_s=30.0).read_bytes() == b"new"
    finally:
        timer.join()
    assert not (home / ".failed").exists()
