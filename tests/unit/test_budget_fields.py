"""CHK-4 on the wire: an inventory event carries each track's `lastUpgrade`, a sequence change its
`minUpgradeInterval`; a bad one is refused where the event is decoded, the reason naming the field
(BUS-4: the service dead-letters it with that reason), and one without the fields reads as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from rollout_common import envelope
from rollout_common.errors import InvalidInputError
from rollout_common.events import InventoryChange, SequenceChange

STAGE = {"name": "prod", "clusterSelector": {"matchLabels": {"env": "prod"}}}


def _decode(model: type[BaseModel], body: dict[str, Any]) -> BaseModel:
    kind = model.model_fields["kind"].default
    headers = {
        "ce_specversion": b"1.0",
        "ce_id": b"e-1",
        "ce_source": b"t",
        "ce_type": f"io.rollout.{kind}.v1".encode(),
    }
    _, event = envelope.decode(json.dumps({"kind": kind, **body}).encode(), headers, (model,))
    return event


def _inventory(last_upgrade: object) -> dict[str, Any]:
    return {"action": "upsert", "cluster": {"name": "c1", "version": "1.31.2", "lastUpgrade": last_upgrade}}


def test_chk_4_an_inventory_event_carries_each_tracks_last_upgrade() -> None:
    event = _decode(
        InventoryChange, _inventory({"controlPlane": "2025-12-20T00:00:00Z", "nodes": "2025-12-21T06:30:00+02:00"})
    )
    assert isinstance(event, InventoryChange) and event.cluster is not None and event.cluster.last_upgrade is not None
    assert event.cluster.last_upgrade.epochs() == (1_766_188_800.0, 1_766_291_400.0)


@pytest.mark.parametrize(
    ("last_upgrade", "field"),
    [
        ({"controlPlane": "yesterday"}, "lastUpgrade.controlPlane"),
        ({"nodes": 1_766_188_800}, "lastUpgrade.nodes"),
        ({"controlPlane": "2025-12-20T00:00:00"}, "lastUpgrade.controlPlane"),  # no zone
        ({"controlPlane": "2025-02-30T00:00:00Z"}, "lastUpgrade.controlPlane"),  # no such day
        ({"controlplane": "2025-12-20T00:00:00Z"}, "lastUpgrade.controlplane"),
    ],
)
def test_chk_4_bus_4_a_bad_last_upgrade_is_refused_naming_the_field(last_upgrade: object, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        _decode(InventoryChange, _inventory(last_upgrade))
    assert f"cluster.{field}" in str(caught.value)


@pytest.mark.parametrize(
    ("where", "interval", "field"),
    [
        ("sequence", {"patch": "a day"}, "minUpgradeInterval.patch"),
        ("stage", {"minor": "400d"}, "minUpgradeInterval.minor"),
        ("stage", {"minor": -1}, "minUpgradeInterval.minor"),
        ("sequence", {"major": "1d"}, "minUpgradeInterval.major"),
    ],
)
def test_chk_4_bus_4_a_bad_min_upgrade_interval_is_refused_naming_the_field(
    where: str, interval: dict[str, Any], field: str
) -> None:
    sequence: dict[str, Any] = {"name": "main", "stages": [dict(STAGE)]}
    (sequence if where == "sequence" else sequence["stages"][0])["minUpgradeInterval"] = interval
    with pytest.raises(InvalidInputError) as caught:
        _decode(SequenceChange, {"commandId": "c1", "sequence": sequence})
    assert field in str(caught.value)


def test_chk_4_a_sequence_and_a_cluster_without_the_fields_dump_as_before() -> None:
    """Snapshots and sequence comparisons see no new key when the fields are not set."""
    change = _decode(SequenceChange, {"commandId": "c1", "sequence": {"name": "main", "stages": [STAGE]}})
    inventory = _decode(InventoryChange, {"action": "upsert", "cluster": {"name": "c1", "version": "1.31.2"}})
    assert isinstance(change, SequenceChange) and isinstance(inventory, InventoryChange)
    assert "minUpgradeInterval" not in json.dumps(change.sequence.model_dump(by_alias=True, mode="json"))
    assert inventory.cluster is not None
    assert "lastUpgrade" not in inventory.cluster.model_dump(by_alias=True, mode="json")
