"""`python -m rollout_adapters.kube_bridge crds` prints the CRDs; `run` runs the bridge."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rollout_adapters.kube_bridge.crd_yaml import crds_yaml


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["crds"]:
        sys.stdout.write(crds_yaml())
        return 0
    print("usage: python -m rollout_adapters.kube_bridge crds", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
