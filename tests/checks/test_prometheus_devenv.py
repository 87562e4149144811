"""The local Prometheus of the tests and of `python -m rollout_devenv prometheus run`: it scrapes the
targets it is given, keeps its data and port in a given data dir across runs, deletes a temporary
one, and a start that cannot succeed fails with the reason and the log, never a skip."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import Exporter, Series
from devenv_command import Running

from rollout_devenv import DevenvError, PrometheusServer


def test_prometheus_run_scrapes_its_targets_and_keeps_data_and_port(
    tmp_path: Path, metrics_exporter: Exporter, series: Series
) -> None:
    series.set(42)
    data = tmp_path / "prometheus"
    first = Running(
        "prometheus", "run", "--data-dir", str(data), "--scrape", metrics_exporter.target, "--scrape-interval", "0.5"
    )
    try:
        assert first.announced.startswith("PROMETHEUS_URL=http://127.0.0.1:"), first.announced
        url = first.announced.removeprefix("PROMETHEUS_URL=")
        series.await_visible(42, url=url)
    finally:
        err = first.stop()
    assert f"data: {data}, kept when it stops; the same --data-dir starts it again with that data and port" in err
    assert (data / "tsdb" / "wal").is_dir()
    second = Running("prometheus", "run", "--data-dir", str(data), "--scrape", metrics_exporter.target)
    try:
        assert second.announced == first.announced
        series.set(43)
        series.await_visible(43, url=url)
    finally:
        second.stop()


def test_prometheus_run_without_a_data_dir_deletes_its_data() -> None:
    server = Running("prometheus", "run")
    assert server.announced.startswith("PROMETHEUS_URL=http://127.0.0.1:")
    err = server.stop()
    note = next(line for line in err.splitlines() if line.startswith("data: "))
    assert note.endswith(", deleted when it stops; keep it with --data-dir DIR (make ... DATA=DIR)")
    assert not Path(note.removeprefix("data: ").split(",")[0]).exists()


def test_a_missing_prometheus_binary_fails_saying_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    server = PrometheusServer(data_dir=tmp_path / "data")
    with pytest.raises(DevenvError) as raised:
        server.start()
    assert raised.value.message == "prometheus not found on PATH; install it (apt-get install prometheus)"
    assert not server.running


def test_a_failed_start_says_why_with_the_log(tmp_path: Path) -> None:
    """The port asked for is taken: Prometheus exits at once, and the error carries its log's reason
    (a port given is kept, not swapped for another)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = PrometheusServer(data_dir=tmp_path / "data", port=taken.getsockname()[1])
        with pytest.raises(DevenvError) as raised:
            server.start()
    log = tmp_path / "data" / "prometheus.log"
    assert raised.value.message == f"prometheus did not start: it exited with code 1; see {log}"
    assert "address already in use" in raised.value.detail
    assert not server.running
