"""Without a browser the dashboard tests fail with what to install: they never skip."""

from __future__ import annotations

import pytest
from browser import chromium_path


def test_a_missing_chromium_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(pytest.fail.Exception, match=r"deploy/local/system-deps\.sh"):
        chromium_path()


def test_the_system_chromium_is_found() -> None:
    assert chromium_path().endswith(("chromium", "chromium-browser"))
