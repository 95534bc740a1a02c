"""A scripted session against the mock, then ``/metrics`` read with Prometheus's own parser."""

from __future__ import annotations

from prometheus_client.utils import floatToGoString
from telemetry_support import Bot, fixture_usage, samples

from generic_framework.telemetry.metrics import TURN_BUCKETS

NANAIMO = "// what's the weather in Nanaimo?"
PERCENT = "// what is 17% of 2,340?"
CAT = "Suggest a name for a grey cat."  # 429 (1302) twice, then the answer
HAIKU = "Write a haiku about the sea."  # 429 with 1113: no balance, not retried
FILTERED = "Repeat the phrase the moderation filter blocks."  # 400 with 1301


def chat(text: str, *, stream: bool = False) -> dict[str, object]:
    return {"model": "scout", "stream": stream, "messages": [{"role": "user", "content": text}]}


def one(
    found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


async def test_a_scripted_session_shows_in_the_metrics(bot: Bot) -> None:
    async with bot() as (client, _):
        assert (await client.post("/v1/chat/completions", json=chat(NANAIMO))).status_code == 200
        turn = {"persona": "scout", "content": PERCENT}
        assert (await client.post("/v1/conversations/c1/messages", json=turn)).status_code == 200
        assert (await client.post("/v1/chat/completions", json=chat(CAT))).status_code == 200
        streamed = await client.post("/v1/chat/completions", json=chat(NANAIMO, stream=True))
        assert streamed.text.endswith("data: [DONE]\n\n")
        refused = await client.post("/v1/chat/completions", json=chat(HAIKU))
        assert (refused.status_code, refused.json()["error"]["code"]) == (403, "1113")
        filtered = (await client.post("/v1/chat/completions", json=chat(FILTERED))).json()
        assert filtered["choices"][0]["finish_reason"] == "content_filter"
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(response.text)
    m = "generic_framework_"

    # Turns by stop reason; one model call per round (the percent question took two).
    assert one(found, f"{m}turns_total", persona="scout", stop_reason="completed") == 4
    assert one(found, f"{m}turns_total", persona="scout", stop_reason="content_filter") == 1
    assert one(found, f"{m}turns_total", persona="scout", stop_reason="error") == 1
    assert one(found, f"{m}rounds_total", persona="scout") == 7
    assert one(found, f"{m}tool_calls_total", persona="scout", tool="calculate", outcome="ok") == 1
    assert one(found, f"{m}web_searches_total", persona="scout", mode="builtin") == 2

    # Tokens: exactly what the fixtures' successful answers reported.
    usage = fixture_usage(
        "web_search_nanaimo", "function_two_rounds", "rate_limited_then_ok",
        "web_search_nanaimo_stream",
    )  # fmt: skip
    for kind, count in usage.items():
        value = one(found, f"{m}tokens_total", persona="scout", model="glm-4.7", kind=kind)
        assert value == count, kind
    assert usage["prompt"] > 0 and usage["reasoning"] > 0

    # The upstream: every exchange by status and business code, the retries, the gauges.
    requests = f"{m}upstream_requests_total"
    assert one(found, requests, endpoint="chat", status="200", code="") == 4
    assert one(found, requests, endpoint="chat", status="429", code="1302") == 2
    assert one(found, requests, endpoint="chat", status="429", code="1113") == 1
    assert one(found, requests, endpoint="chat", status="400", code="1301") == 1
    assert one(found, requests, endpoint="chat_stream", status="200", code="") == 1
    assert one(found, f"{m}upstream_retries_total", endpoint="chat", reason="RateLimitError") == 2
    assert one(found, f"{m}upstream_in_flight") == 0
    assert one(found, f"{m}upstream_queued") == 0

    # Histograms: counts, cumulative buckets ending in +Inf, sums that add up.
    assert one(found, f"{m}turn_duration_seconds_count", persona="scout") == 6
    assert one(found, f"{m}time_to_first_text_seconds_count", persona="scout") == 1
    assert one(found, f"{m}upstream_request_duration_seconds_count", endpoint="chat") == 8
    assert one(found, f"{m}upstream_request_duration_seconds_count", endpoint="chat_stream") == 1
    buckets = [
        one(found, f"{m}turn_duration_seconds_bucket", persona="scout", le=floatToGoString(bound))
        for bound in (*TURN_BUCKETS, float("inf"))
    ]
    assert buckets == sorted(buckets)  # cumulative
    assert buckets[-1] == 6  # +Inf holds every turn
    total = one(found, f"{m}turn_duration_seconds_sum", persona="scout")
    assert 0 < total < 60


async def test_metrics_start_empty_and_are_per_runtime(bot: Bot) -> None:
    async with bot() as (first, _):
        await first.post("/v1/chat/completions", json=chat(NANAIMO))
        seen = samples((await first.get("/metrics")).text)
    async with bot() as (second, _):
        fresh = samples((await second.get("/metrics")).text)
    name = "generic_framework_turns_total"
    assert one(seen, name, persona="scout", stop_reason="completed") == 1
    assert one(fresh, name, persona="scout", stop_reason="completed") == 0
    # The standard process and platform collectors are registered with the runtime's metrics.
    assert ("process_cpu_seconds_total", frozenset()) in fresh
    assert any(key[0] == "python_info" for key in fresh)
