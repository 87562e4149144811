"""Fleet's format as it is (PART-2, SEQ-5): the rolloutStrategy blocks of Fleet's own documentation, pasted
unchanged into a stage, partition the clusters as Fleet would; cluster groups are inventory objects with
labels; `rollout import fleet` reads fleet.yaml and GitRepo files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rollout_cli.main import main

OLD = "1.30.5-gke.1000"

# fleet.yaml reference (rancher/fleet-docs, ref-fleet-yaml.md): its partition names a group, a label
# selector, and a clusterGroupSelector that nests a clusterSelector (which Fleet reads as `{}`).
REFERENCE_BLOCK = """
rolloutStrategy:
    maxUnavailable: 15%
    maxUnavailablePartitions: 20%
    autoPartitionSize: 10%
    partitions:
    - name: canary
      maxUnavailable: 10%
      clusterSelector:
        matchLabels:
          env: prod
      clusterGroup: agroup
      clusterGroupSelector:
        clusterSelector:
          matchLabels:
            env: prod
"""

# rollout.md: manual partitions by label, and the strict 200-cluster case.
MANUAL_BLOCK = """
rolloutStrategy:
  partitions:
    - name: demoRollout
      maxUnavailable: 10%
      clusterSelector:
        matchLabels:
          env: staging
    - name: stable
      maxUnavailable: 5%
      clusterSelector:
        matchLabels:
          env: prod
"""
STRICT_BLOCK = """
rolloutStrategy:
  maxUnavailable: 0
  maxUnavailablePartitions: 0
  partitions:
    - name: demoRollout
      clusterSelector:
        matchLabels:
          stage: demoRollout
    - name: stable
      clusterSelector:
        matchLabels:
          stage: stable
"""


def _scenario(tmp_path: Path, block: str, *, generate: list[dict[str, Any]], **extra: Any) -> Path:
    strategy = yaml.safe_load(block)["rolloutStrategy"]
    document = {
        "generate": [{"version": OLD, **g} for g in generate],
        "sequence": {"name": "fleet", "stages": [{"name": "all", "clusterSelector": {}, "rolloutStrategy": strategy}]},
        **extra,
    }
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _plan(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["plan", str(path), "--json"]) == 0, capsys.readouterr().err
    stage: dict[str, Any] = json.loads(capsys.readouterr().out)["stages"][0]
    return stage


def test_part2_fleets_reference_example_unchanged_partitions_every_cluster_of_its_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = [{"name": "agroup", "labels": {"team": "a"}, "selector": {"matchLabels": {"env": "prod"}}}]
    path = _scenario(
        tmp_path,
        REFERENCE_BLOCK,
        generate=[
            {"count": 30, "name": "prod-{i:02d}", "labels": {"env": "prod"}},
            {"count": 5, "name": "dev-{i}", "labels": {"env": "dev"}},
        ],
        clusterGroups=groups,
    )
    stage = _plan(capsys, path)
    assert [(p["name"], len(p["clusters"]), p["maxUnavailable"]) for p in stage["partitions"]] == [("canary", 30, 3)]
    assert len(stage["noPartition"]) == 5 and all(n.startswith("dev-") for n in stage["noPartition"])


def test_part2_without_the_group_in_the_inventory_the_reference_example_matches_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(
        tmp_path, REFERENCE_BLOCK, generate=[{"count": 30, "name": "prod-{i:02d}", "labels": {"env": "prod"}}]
    )
    stage = _plan(capsys, path)
    assert stage["partitions"][0]["clusters"] == [] and len(stage["noPartition"]) == 30


@pytest.mark.parametrize(
    ("block", "generate", "expected"),
    [
        (
            MANUAL_BLOCK,
            [
                {"count": 20, "name": "stg-{i}", "labels": {"env": "staging"}},
                {"count": 40, "name": "prd-{i}", "labels": {"env": "prod"}},
            ],
            [("demoRollout", 20, 2), ("stable", 40, 2)],
        ),
        (
            STRICT_BLOCK,
            [
                {"count": 40, "name": "demo-{i:03d}", "labels": {"stage": "demoRollout"}},
                {"count": 160, "name": "stable-{i:03d}", "labels": {"stage": "stable"}},
            ],
            [("demoRollout", 40, 0), ("stable", 160, 0)],
        ),
    ],
    ids=["manual-by-label", "strict-200"],
)
def test_part2_fleets_rollout_page_examples_unchanged(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    block: str,
    generate: list[dict[str, Any]],
    expected: list[tuple[str, int, int]],
) -> None:
    stage = _plan(capsys, _scenario(tmp_path, block, generate=generate))
    assert [(p["name"], len(p["clusters"]), p["maxUnavailable"]) for p in stage["partitions"]] == expected
    assert stage["noPartition"] == []


def test_a_group_selector_written_as_a_name_says_what_to_write_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    block = "rolloutStrategy:\n  partitions:\n  - name: canary\n    clusterGroupSelector: agroup\n"
    path = _scenario(tmp_path, block, generate=[{"count": 1, "name": "c-{i}"}])
    assert main(["validate", str(path)]) == 1
    assert "clusterGroupSelector: 'agroup' is a name, not a label selector; name one group with clusterGroup" in (
        capsys.readouterr().err
    )


def test_import_fleet_prints_the_fleet_yaml_block_unchanged_as_a_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text("defaultNamespace: web\nhelm:\n  chart: ./chart\n" + REFERENCE_BLOCK)
    assert main(["import", "fleet", str(source), "--stage", "prod"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# from {source}: paste under sequence.stages\n")
    (stage,) = yaml.safe_load(out)
    assert stage == {
        "name": "prod",
        "clusterSelector": {},
        "rolloutStrategy": yaml.safe_load(REFERENCE_BLOCK)["rolloutStrategy"],
    }


def test_import_fleet_reads_a_gitrepo_and_takes_its_single_target_as_the_stage_selector(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "gitrepo.yaml"
    gitrepo = {
        "apiVersion": "fleet.cattle.io/v1alpha1",
        "kind": "GitRepo",
        "metadata": {"name": "web", "namespace": "fleet-default"},
        "spec": {
            "repo": "https://git.example.com/web",
            "paths": ["chart"],
            "targets": [{"clusterGroup": "agroup"}],
            "rolloutStrategy": yaml.safe_load(STRICT_BLOCK)["rolloutStrategy"],
        },
    }
    source.write_text(yaml.safe_dump(gitrepo))
    assert main(["import", "fleet", str(source)]) == 0
    (stage,) = yaml.safe_load(capsys.readouterr().out)
    assert stage["name"] == "web" and stage["clusterGroup"] == "agroup"
    assert stage["rolloutStrategy"]["partitions"][1] == {
        "name": "stable",
        "clusterSelector": {"matchLabels": {"stage": "stable"}},
    }


def test_import_fleet_of_a_file_without_a_strategy_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "fleet.yaml"
    source.write_text("defaultNamespace: web\n")
    assert main(["import", "fleet", str(source)]) == 1
    assert "no rolloutStrategy, and no GitRepo, Bundle or HelmOp" in capsys.readouterr().err


def test_the_gke_worked_example_of_the_strategy_page_is_a_valid_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "rollout-strategy.md").read_text()
    block = next(b for b in page.split("```yaml\n")[1:] if "name: acme" in b).split("```")[0]
    path = tmp_path / "acme.yaml"
    path.write_text(block)
    capsys.readouterr()
    assert main(["plan", str(path), "--json"]) == 0, capsys.readouterr().err
    stages = json.loads(capsys.readouterr().out)["stages"]
    assert [(s["name"], [(p["name"], p["clusters"]) for p in s["partitions"]]) for s in stages] == [
        ("dev", [("All", ["dev-1"])]),
        ("staging", [("All", ["stg-1"])]),
        ("production", [("europe", ["eu-1"]), ("america", ["us-1"])]),
    ]
