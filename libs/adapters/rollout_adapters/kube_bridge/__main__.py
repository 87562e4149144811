"""`python -m rollout_adapters.kube_bridge run` runs one bridge replica (settings from `ROLLOUT_*`);
`... crds` prints the CRDs the chart ships."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

from pydantic import ValidationError

from rollout_adapters.kube_bridge.crd_yaml import crds_yaml
from rollout_adapters.kube_bridge.serve import Replica
from rollout_adapters.kube_bridge.settings import BridgeSettings
from rollout_adapters.shutdown import stop_on_signals
from rollout_common import json_logging
from rollout_common.errors import RolloutError

log = logging.getLogger("rollout_adapters.kube_bridge")
USAGE = "usage: python -m rollout_adapters.kube_bridge {run|crds}"


async def _run(settings: BridgeSettings) -> int:
    stop = stop_on_signals()
    kept = await Replica(settings).run(stop)
    return 0 if kept else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["crds"]:
        sys.stdout.write(crds_yaml())
        return 0
    if args != ["run"]:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        settings = BridgeSettings()
    except ValidationError as exc:
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 2
    json_logging.configure(settings.log_level)
    try:
        return asyncio.run(_run(settings))
    except RolloutError as exc:
        log.error("the bridge stopped: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
