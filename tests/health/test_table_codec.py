"""The monitor's table rows are written with msgspec's JSON, in the bytes faust's `json` codec
wrote: a changelog written before the change is read back the same, and one written after reads
with faust's codec too (a worker of the older version in the same group during an upgrade)."""

from __future__ import annotations

from faust.serializers.codecs import get_codec

from rollout_adapters.faust_msgspec_json import MsgspecJson
from rollout_health.cluster_health import ClusterHealth
from rollout_health.monitor import KeyPartitionedTable, MonitorApp

ROW = ClusterHealth(
    ready=True,
    last_seen=1764720000.125,
    last_published=False,
    published_observed_at=1764719999.5,
    control_plane_version="1.31.13-gke.1023000",
    node_version=None,
).model_dump()


def test_rows_and_keys_are_the_bytes_faust_json_writes_and_read_back_either_way() -> None:
    ours, faust_json = MsgspecJson(), get_codec("json")
    for value in (ROW, "eu-west-1-prod-0042", "ĉluster-ü"):
        assert ours.loads(faust_json.dumps(value)) == value
        assert faust_json.loads(ours.dumps(value)) == value
    assert ours.dumps(ROW) == faust_json.dumps(ROW)
    assert ours.dumps("eu-west-1-prod-0042") == b'"eu-west-1-prod-0042"'


def test_the_monitor_table_writes_keys_and_rows_with_it() -> None:
    app = MonitorApp("table-codec-test", broker="kafka://127.0.0.1:9", autodiscover=False)
    table = KeyPartitionedTable(app, name="cluster-health", partitions=4, key_type=str)
    assert isinstance(table.key_serializer, MsgspecJson)
    assert isinstance(table.value_serializer, MsgspecJson)
