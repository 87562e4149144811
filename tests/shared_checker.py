"""The shared conformance checker (../shared/conformance/check.py) as a module, for tests that
check reports in process: it is a script beside the repository, not a package, and is only read."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

CHECK_PY = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "check.py"


def load_checker(path: Path = CHECK_PY, *, name: str = "shared_conformance_check") -> ModuleType:
    """The checker loaded once per `name` (a caller that adjusts its copy loads it under its own name)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"the shared conformance checker is missing: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
