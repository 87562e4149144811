"""CHK-2 / BUS-2: the check_result event travels like every other event: CloudEvents 1.0 in both
content modes, read and written by the CloudEvents SDK's Kafka binding; and a result evaluated on the
real Prometheus is published on `rollout.check-results` of a real broker, keyed by its rollout."""

from __future__ import annotations

import json

import pytest
from cloudevents.core.bindings import kafka as ce_kafka
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from conftest import Series
from topic_reader import read_topic

from rollout_adapters.kafka_bus import KafkaBus
from rollout_common import envelope
from rollout_common.check_results import CheckOutcome, CheckResult
from rollout_common.checks import Check
from rollout_common.topics.catalog import CHECK_RESULTS
from rollout_health.checks import PrometheusQuery, evaluate_check
from rollout_health.settings import ChecksSettings

RESULT = CheckResult(
    rollout_id="r-7",
    stage="prod",
    check="error-rate",
    observed_at=1_790_000_000.5,
    value=0.05,
    outcome=CheckOutcome.FAILED,
    reason="0.05: successCondition result < 0.01 does not hold",
)


@pytest.mark.parametrize("mode", ["binary", "structured"])
def test_bus2_an_sdk_check_result_is_read_in_both_modes(mode: str) -> None:
    event = CloudEvent(
        attributes={
            "type": "io.rollout.check_result.v1",
            "source": "/a-pipeline",
            "id": "e-1",
            "datacontenttype": "application/json",
        },
        data=json.loads(RESULT.model_dump_json(by_alias=True)),
    )
    convert = ce_kafka.to_binary if mode == "binary" else ce_kafka.to_structured
    message = convert(event, JSONFormat())
    meta, decoded = envelope.decode(message.value, message.headers, CHECK_RESULTS.models)
    assert decoded == RESULT and (meta.id, meta.type) == ("e-1", "io.rollout.check_result.v1")


def test_bus2_a_check_result_with_no_value_reads_back_as_null() -> None:
    inconclusive = RESULT.model_copy(update={"value": None, "outcome": CheckOutcome.INCONCLUSIVE, "reason": "x"})
    value, headers = envelope.encode(inconclusive, event_id="e-2", source="rollout-health", at=1.0)
    assert json.loads(value)["value"] is None
    assert envelope.decode(value, headers, CHECK_RESULTS.models)[1] == inconclusive


@pytest.mark.integration
@pytest.mark.asyncio(loop_scope="session")
async def test_chk2_an_evaluated_result_is_published_keyed_by_rollout(
    series: Series, kafka_bootstrap: str, topic_prefix: str
) -> None:
    series.set(0.05)
    series.await_visible(0.05)
    check = Check(name="error-rate", query=series.query, success_condition="result < 0.01", interval=60)
    async with PrometheusQuery(ChecksSettings(timeout_s=5)) as source:
        result = await evaluate_check(
            source, check, rollout_id="r-7", stage="prod", base_url=series.url, clock=lambda: 1_790_000_000.5
        )
    assert result == RESULT
    topic = f"{topic_prefix}.{CHECK_RESULTS.name}"
    bus = KafkaBus(kafka_bootstrap, client_id=f"{topic_prefix}-health")
    try:
        await bus.ensure_topics([CHECK_RESULTS.spec(f"{topic_prefix}.")])
        value, headers = envelope.encode(result, event_id="eval-1", source="rollout-health", at=result.observed_at)
        await bus.publish(topic, key=CHECK_RESULTS.key(result).encode(), value=value, headers=headers)
    finally:
        await bus.close()
    (record,) = await read_topic(kafka_bootstrap, topic, until=lambda rs: len(rs) >= 1, partitions=4)
    assert record.key == b"r-7"
    event = ce_kafka.from_kafka(
        ce_kafka.KafkaMessage(headers=dict(record.headers), key=record.key, value=record.value), JSONFormat()
    )
    assert (event.get_type(), event.get_source(), event.get_id()) == (
        "io.rollout.check_result.v1",
        "rollout-health",
        "eval-1",
    )
    assert event.get_data() == {
        "kind": "check_result",
        "rolloutId": "r-7",
        "stage": "prod",
        "check": "error-rate",
        "observedAt": 1_790_000_000.5,
        "value": 0.05,
        "outcome": "failed",
        "reason": "0.05: successCondition result < 0.01 does not hold",
    }
