"""A stand-in for the gcloud, az and aws CLIs, for the managed-cluster recipes' tests: the
simulated cloud of one cluster (its control-plane version and node pools, in a JSON file), which
records every argv it is run with and answers the few commands the recipes use."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def main(tool: str, args: list[str]) -> int:
    state_path = Path(os.environ["STANDIN_STATE"])
    state = json.loads(state_path.read_text())
    with Path(os.environ["STANDIN_RECORD"]).open("a") as record:
        record.write(json.dumps([tool, *args]) + "\n")
    pools: dict[str, str] = state["pools"]
    command = " ".join(a for a in args[:3] if not a.startswith("-"))
    out: str | None = None
    if tool == "gcloud" and command.startswith("container clusters describe"):
        out = state["master"]
    elif tool == "gcloud" and command.startswith("container node-pools list"):
        out = "\n".join(pools)
    elif tool == "gcloud" and command.startswith("container node-pools describe"):
        out = pools[args[3]]
    elif tool == "gcloud" and command.startswith("container clusters upgrade"):
        version = _flag(args, "--cluster-version")
        if "--master" in args:
            state["master"] = version
        elif version != state["master"]:
            print(f"ERROR: node version {version} must match the master version {state['master']}", file=sys.stderr)
            return 1
        else:
            pools[_flag(args, "--node-pool")] = version
    elif tool == "az" and command == "aks show":
        out = state["master"]
    elif tool == "az" and command == "aks upgrade":
        state["master"] = _flag(args, "--kubernetes-version")
    elif tool == "az" and command == "aks nodepool list":
        out = "\n".join(pools)
    elif tool == "az" and command == "aks nodepool show":
        out = pools[_flag(args, "--name")]
    elif tool == "az" and command == "aks nodepool upgrade":
        pools[_flag(args, "--name")] = _flag(args, "--kubernetes-version")
    elif tool == "aws" and command == "eks describe-cluster":
        out = state["master"]
    elif tool == "aws" and command == "eks update-cluster-version":
        state["master"] = _flag(args, "--kubernetes-version")
    elif tool == "aws" and command == "eks list-nodegroups":
        out = "\t".join(pools)
    elif tool == "aws" and command == "eks describe-nodegroup":
        out = pools[_flag(args, "--nodegroup-name")]
    elif tool == "aws" and command == "eks update-nodegroup-version":
        pools[_flag(args, "--nodegroup-name")] = _flag(args, "--kubernetes-version")
    elif not (tool == "aws" and command.startswith("eks wait")):
        print(f"stand-in {tool}: unexpected command {args}", file=sys.stderr)
        return 2
    state_path.write_text(json.dumps(state))
    if out is not None:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).name, sys.argv[2:]))
