"""CHK-2: whatever a server answers on Prometheus's address, the evaluator reads a value or a reason,
never an exception (a hostile or broken body included); and a bearer token from the settings reaches
a Prometheus behind an authenticating proxy, on the real server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from conftest import Series
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from rollout_common.check_results import CheckOutcome
from rollout_common.checks import Check
from rollout_health.checks import PrometheusQuery, QueryAnswer, evaluate_check
from rollout_health.checks.prometheus import MAX_BODY_BYTES, parse_answer
from rollout_health.settings import ChecksSettings

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=10,
)
SHAPES = st.fixed_dictionaries(
    {"status": st.sampled_from(["success", "error"]) | JSON},
    optional={
        "data": st.fixed_dictionaries(
            {"resultType": st.sampled_from(["vector", "scalar", "matrix", "string"]) | JSON, "result": JSON}
        )
        | JSON,
        "errorType": JSON,
        "error": JSON,
    },
)


@settings(max_examples=400, deadline=None)
@given(status=st.integers(100, 599), body=st.binary(max_size=200) | SHAPES.map(lambda d: json.dumps(d).encode()))
def test_chk2_any_answer_reads_as_a_value_or_a_problem(status: int, body: bytes) -> None:
    answer = parse_answer(status, body)
    assert isinstance(answer, QueryAnswer)
    assert answer.value is None or answer.problem is None


def _body(data: dict[str, Any]) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


@pytest.mark.parametrize(
    ("status", "body", "answer"),
    [
        (200, _body({"resultType": "vector", "result": [{"metric": {}, "value": [1, "0.5"]}]}), QueryAnswer(0.5)),
        (200, _body({"resultType": "vector", "result": [{"value": [1, "2"]}, {"value": [1, "3"]}]}), QueryAnswer(2)),
        (200, _body({"resultType": "scalar", "result": [1, "+Inf"]}), QueryAnswer(float("inf"))),
        (200, _body({"resultType": "vector", "result": []}), QueryAnswer()),
        (
            200,
            _body({"resultType": "vector", "result": [{"value": [1, "many"]}]}),
            QueryAnswer(problem="a sample value that is no number: 'many'"),
        ),
        (
            200,
            _body({"resultType": "string", "result": [1, "x"]}),
            QueryAnswer(problem="the query returns a string, not an instant vector or a scalar"),
        ),
        (
            422,
            b'{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}',
            QueryAnswer(problem="query error (HTTP 422, execution): many-to-many matching not allowed"),
        ),
        (
            502,
            b"<html>Bad Gateway</html>",
            QueryAnswer(problem="HTTP 502, not a Prometheus answer: '<html>Bad Gateway</html>'"),
        ),
        (200, b" " * (MAX_BODY_BYTES + 1), QueryAnswer(problem=f"HTTP 200: an answer above {MAX_BODY_BYTES} bytes")),
    ],
)
def test_chk2_answers_read_as_prometheus_means_them(status: int, body: bytes, answer: QueryAnswer) -> None:
    assert parse_answer(status, body) == answer


TOKEN = "t0ken-for-checks"


@pytest.fixture
async def bearer_proxy(prometheus_url: str) -> AsyncIterator[str]:
    """An authenticating proxy on loopback, as deployments put in front of Prometheus: it forwards a
    request with the right bearer token to the real server and refuses any other with 401."""

    async def forward(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401, text="missing or wrong bearer token")
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{prometheus_url}{request.path}", params=request.query) as upstream,
        ):
            return web.Response(status=upstream.status, body=await upstream.read(), content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", forward)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


# The proxy fixture runs on the session's loop (the suite's default for fixtures): so does the test.
@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(
    ("token", "outcome", "reason"),
    [
        (TOKEN, CheckOutcome.PASSED, "0.003: successCondition result < 0.01 holds"),
        ("stolen", CheckOutcome.INCONCLUSIVE, "HTTP 401, not a Prometheus answer: 'missing or wrong bearer token'"),
    ],
)
async def test_chk2_a_bearer_token_from_settings(
    series: Series, bearer_proxy: str, token: str, outcome: CheckOutcome, reason: str
) -> None:
    series.set(0.003)
    series.await_visible(0.003)
    check = Check(name="errors", query=series.query, success_condition="result < 0.01", interval=60)
    async with PrometheusQuery(ChecksSettings(timeout_s=5, bearer_token=SecretStr(token))) as source:
        result = await evaluate_check(
            source, check, rollout_id="r-1", stage="prod", base_url=bearer_proxy, clock=lambda: 5.0
        )
    assert (result.outcome, result.reason) == (outcome, reason)


@pytest.fixture
async def chunked_server() -> AsyncIterator[str]:
    """A server on loopback answering a valid vector of 5,000 samples in 1 KiB chunks."""
    samples = [{"metric": {"i": str(i)}, "value": [1, str(i + 0.5)]} for i in range(5000)]
    body = _body({"resultType": "vector", "result": samples})

    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for start in range(0, len(body), 1024):
            await response.write(body[start : start + 1024])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/api/v1/query", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.mark.asyncio(loop_scope="session")
async def test_chk2_an_answer_in_many_chunks_is_read_whole(chunked_server: str) -> None:
    async with PrometheusQuery(ChecksSettings(timeout_s=5)) as source:
        assert await source.ask("anything", base_url=chunked_server) == QueryAnswer(0.5)
