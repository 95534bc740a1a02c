"""The /v1 endpoints over scripted personas: shapes, streaming, errors, conversations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from service_fakes import FOOTER, FakePersona, chunks, make_reply

from generic_framework.errors import ConfigError, StoreUnavailableError
from generic_framework.redaction import register_secret
from generic_framework.store import SQLiteStore
from generic_framework.wire.errors import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ContentFilterError,
    ContextTooLongError,
    InsufficientBalanceError,
    NotFoundError,
    QuotaExceededError,
    RateLimitError,
    ResponseValidationError,
    ServerError,
    UpstreamBusyError,
)
from generic_framework.wire.messages import AssistantMessage, UserMessage

Client = Callable[..., httpx.AsyncClient]


def ask(text: str = "// what's the weather in Nanaimo?", **extra: Any) -> dict[str, Any]:
    return {"model": "scout", "messages": [{"role": "user", "content": text}], **extra}


async def test_health_is_public_and_ready_checks_everything(client_for: Client) -> None:
    async with client_for(token=None, bot_api_token="secret-token-1") as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert set(ready.json()["checks"]) == {"store", "personas", "upstream"}


async def test_not_ready_without_personas_or_key(client_for: Client) -> None:
    async with client_for({}, api_key=None) as client:
        ready = await client.get("/readyz")
    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["personas"].startswith("fail")
    assert "OPENAI_API_KEY" in checks["upstream"]


async def test_models_lists_the_personas(client_for: Client) -> None:
    personas = {"scout": FakePersona("scout"), "aria": FakePersona("aria", description="")}
    async with client_for(personas) as client:
        body = (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["aria", "scout"]
    assert body["data"][1]["description"] == "finds things out"


async def test_completion_has_openai_shape_and_zai_web_search(client_for: Client) -> None:
    persona = FakePersona()
    async with client_for({"scout": persona}) as client:
        response = await client.post("/v1/chat/completions", json=ask())
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "scout"
    content = "Light rain and 9 degrees [1]." + FOOTER
    citation = {
        "url": "https://weather.example.org/nanaimo",
        "title": "Nanaimo weather",
        "start_index": 25,
        "end_index": 28,
    }
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": content,
        "annotations": [{"type": "url_citation", "url_citation": citation}],
    }
    assert content[25:28] == "[1]"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    assert body["web_search"] == [
        {
            "title": "Nanaimo weather",
            "link": "https://weather.example.org/nanaimo",
            "content": "Light rain, 9 degrees.",
            "media": "Example Weather",
            "icon": "",
            "refer": "ref_1",
            "publish_date": "2026-03-13",
        }
    ]
    assert body["citations"][0]["number"] == 1
    # The `//` prefix reaches the persona untouched; stateless requests have no conversation.
    assert persona.calls == [("// what's the weather in Nanaimo?", None)]


@pytest.mark.parametrize("stream", [False, True])
async def test_earlier_messages_are_the_turns_history(client_for: Client, stream: bool) -> None:
    persona = FakePersona()
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "earlier answer"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "now "}, {"type": "text", "text": "this"}],
        },
    ]
    async with client_for({"scout": persona}) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={"model": "scout", "messages": messages, "temperature": 0.2, "stream": stream},
        )
    assert response.status_code == 200
    assert persona.calls == [("now this", None)]
    assert persona.histories == [messages[:3]]


async def test_conversation_id_ignores_the_earlier_messages(client_for: Client) -> None:
    persona = FakePersona()
    earlier = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "a"}]
    async with client_for({"scout": persona}) as client:
        response = await client.post(
            "/v1/chat/completions",
            json={
                **ask("hi", conversation_id="c-2"),
                "messages": [*earlier, ask("hi")["messages"][0]],
            },
        )
    assert response.status_code == 200
    assert persona.calls == [("hi", "c-2")]
    assert persona.histories == [None]


@pytest.mark.parametrize(
    ("earlier", "code", "where"),
    [
        ([{"role": "user", "content": "x" * 101}], "message_too_long", "messages[0]"),
        ([{"role": "system", "content": "s" * 101}], "message_too_long", "messages[0]"),
        ([{"role": "user", "content": "  "}], "invalid_message", "messages[0]"),
        (
            [{"role": "user", "content": "q"}, {"role": "user", "content": [{"type": "file"}]}],
            "invalid_message",
            "messages[1].content[0]",
        ),
    ],
)
async def test_bad_earlier_messages_are_refused_by_index(
    client_for: Client, earlier: list[dict[str, Any]], code: str, where: str
) -> None:
    persona = FakePersona()
    body = {"model": "scout", "messages": [*earlier, {"role": "user", "content": "now"}]}
    async with client_for({"scout": persona}, bot_max_message_chars=100) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == code
    assert where in response.json()["error"]["message"]
    assert persona.calls == []


async def test_long_answers_and_many_turns_are_not_refused(client_for: Client) -> None:
    persona = FakePersona()
    earlier: list[dict[str, Any]] = []
    for n in range(300):
        earlier += [
            {"role": "user", "content": f"q{n}"},
            {"role": "assistant", "content": "a" * 500},
        ]
    body = {"model": "scout", "messages": [*earlier, {"role": "user", "content": "now"}]}
    async with client_for({"scout": persona}, bot_max_message_chars=100) as client:
        response = await client.post("/v1/chat/completions", json=body)
    # 601 messages, 150 KB: over the old 64 KiB body limit, under the 1 MiB default.
    assert response.status_code == 200, response.text
    assert len(persona.histories[0] or []) == 600


async def test_a_persona_can_refuse_the_clients_system_messages(client_for: Client) -> None:
    persona = FakePersona(allow_client_system=False)
    body = {
        "model": "scout",
        "messages": [{"role": "system", "content": "Be a pirate."}, ask("hi")["messages"][0]],
    }
    async with client_for({"scout": persona}) as client:
        refused = await client.post("/v1/chat/completions", json=body)
        plain = await client.post("/v1/chat/completions", json=ask("hi"))
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "system_not_allowed"
    assert plain.status_code == 200
    assert persona.calls == [("hi", None)]


async def test_conversation_id_extension_uses_server_history(client_for: Client) -> None:
    persona = FakePersona()
    async with client_for({"scout": persona}) as client:
        response = await client.post("/v1/chat/completions", json=ask("hi", conversation_id="c-1"))
    assert response.json()["conversation_id"] == "c-1"
    assert persona.calls == [("hi", "c-1")]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (ask("x" * 101), 400, "message_too_long"),
        (ask("   "), 400, "empty_message"),
        (
            {"model": "scout", "messages": [{"role": "assistant", "content": "hi"}]},
            400,
            "invalid_role",
        ),
        ({"model": "scout", "messages": []}, 400, "empty_messages"),
        (
            {"model": "nobody", "messages": [{"role": "user", "content": "hi"}]},
            404,
            "model_not_found",
        ),
        (ask(conversation_id="../etc/passwd"), 400, "invalid_conversation_id"),
        (ask(conversation_id="x" * 129), 400, "invalid_conversation_id"),
        ({**ask("hi"), "stream": "yes"}, 400, "bool_type"),
        ({**ask("hi"), "stream": 1}, 400, "bool_type"),
        (
            {"model": "scout", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            400,
            "unsupported",
        ),
    ],
)
async def test_invalid_requests_get_openai_errors(
    client_for: Client, body: dict[str, Any], status: int, code: str
) -> None:
    async with client_for(bot_max_message_chars=100) as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "param", "code"}


async def test_malformed_json_is_400(client_for: Client) -> None:
    async with client_for() as client:
        response = await client.post(
            "/v1/chat/completions",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "json_invalid"


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_an_encoded_slash_is_not_redirected_to_another_conversation(
    client_for: Client, method: str
) -> None:
    async with client_for() as client:
        response = await client.request(method, "/v1/conversations/c1%2F")
    # Starlette used to answer 307 to /v1/conversations/c1: a DELETE there is another delete.
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_unknown_route_and_method_are_json(client_for: Client) -> None:
    async with client_for() as client:
        missing = await client.get("/v1/nothing")
        wrong = await client.get("/v1/chat/completions")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("error", "status", "code", "retry"),
    [
        (ContentFilterError("blocked", status_code=400, code="1301"), 400, "1301", None),
        (ContentFilterError("sensitive"), 400, "content_filter", None),
        (BadRequestError("messages invalid", status_code=400, code="1214"), 400, "1214", None),
        (BadRequestError("prompt too long", status_code=400, code="1261"), 400, "1261", None),
        (
            ContextTooLongError("prompt too long", status_code=400, code="1261"),
            400,
            "context_length_exceeded",
            "never",
        ),
        (BadRequestError("no permission", status_code=400, code="1220"), 403, "1220", "never"),
        (BadRequestError("bad gateway page", status_code=400), 400, "upstream_bad_request", None),
        (NotFoundError("model does not exist", code="1211"), 400, "1211", None),
        (NotFoundError("no such API", status_code=404), 502, "upstream_not_found", "never"),
        (AuthenticationError("bad key", status_code=401, code="1002"), 403, "1002", "never"),
        (InsufficientBalanceError("arrears", status_code=429, code="1113"), 403, "1113", "never"),
        (QuotaExceededError("plan lacks model", code="1311"), 403, "1311", "never"),
        (QuotaExceededError("5-hour limit", code="1308", retry_after=60), 429, "1308", "never"),
        (RateLimitError("concurrency", code="1302", retry_after=2.5), 429, "1302", "3"),
        (RateLimitError("bare 429", status_code=429), 429, "rate_limited", "1"),
        (RateLimitError("overloaded", code="1305"), 503, "1305", "1"),
        (RateLimitError("switch model", code="1312", retry_after=4), 503, "1312", "4"),
        (UpstreamBusyError("no slot", retry_after=7.2), 503, "upstream_busy", "8"),
        (StoreUnavailableError("db down"), 503, "store_unavailable", "1"),
        (ServerError("boom", status_code=500), 502, "upstream_error", None),
        (ServerError("boom", status_code=500, code="1234"), 502, "1234", None),
        (ResponseValidationError("html page"), 502, "upstream_invalid_response", None),
        (APIConnectionError("refused"), 502, "upstream_unreachable", None),
        (APITimeoutError("read timeout"), 504, "upstream_timeout", None),
        (ConfigError("PERSONAS_DIR is wrong"), 500, "configuration_error", "never"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_errors_map_to_what_clients_handle_right(
    client_for: Client,
    error: Exception,
    status: int,
    code: str,
    retry: str | None,
    stream: bool,
) -> None:
    persona = FakePersona(error=error, error_after=0)
    async with client_for({"scout": persona}) as client:
        response = await client.post("/v1/chat/completions", json=ask(stream=stream))
    assert response.status_code == status
    body = response.json()
    assert body["error"]["code"] == code
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert "internal detail" not in response.text
    headers = response.headers
    if retry == "never":
        assert headers["x-should-retry"] == "false"
    elif retry is not None:
        assert headers["retry-after"] == retry
        assert "x-should-retry" not in headers
    else:
        assert "retry-after" not in headers and "x-should-retry" not in headers
    if 400 <= status < 500 and status != 429:
        # A refusal that would come back the same: not retried, by the openai client either.
        assert body["error"]["type"] in {"invalid_request_error", "permission_error"}


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unexpected_error_is_a_500_then_reaches_the_server(
    client_for: Client, stream: bool
) -> None:
    persona = FakePersona(error=RuntimeError("internal detail"), error_after=0)
    async with client_for({"scout": persona}, raise_app_exceptions=False) as client:
        response = await client.post("/v1/chat/completions", json=ask(stream=stream))
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "internal detail" not in response.text
    # A bug is answered, then raised on for the server to log with its traceback.
    async with client_for({"scout": persona}) as client:
        with pytest.raises(RuntimeError, match="internal detail"):
            await client.post("/v1/chat/completions", json=ask(stream=stream))


async def test_error_bodies_never_hold_secrets(client_for: Client) -> None:
    key = "0123456789abcdef" * 2 + ".ABCDEFGHijklmnop"  # fake, in Z.AI's shape
    register_secret(key)
    error = AuthenticationError(f"key {key} refused; Authorization: Bearer {key}", code="1002")
    async with client_for({"scout": FakePersona(error=error)}) as client:
        response = await client.post("/v1/chat/completions", json=ask())
    assert response.status_code == 403
    assert key not in response.text
    assert "ABCDEFGHijklmnop" not in response.text


async def test_stream_is_openai_chunks_with_progress_and_sources(client_for: Client) -> None:
    async with client_for() as client:
        response = await client.post("/v1/chat/completions", json=ask(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = chunks(response.text)
    assert frames[-1] == "[DONE]"
    first, *middle, last, _ = frames
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len({f["id"] for f in frames[:-1]}) == 1
    progress = [f["progress"] for f in middle if "progress" in f]
    assert progress == [
        {"event": "round_started", "round": 1, "tools": ["web_search"]},
        {"event": "tool_finished", "name": "web_search", "ok": True, "ms": 12.3},
    ]
    text = "".join(f["choices"][0]["delta"].get("content", "") for f in middle)
    assert text == "Light rain and 9 degrees [1]." + FOOTER
    assert middle[-1]["choices"][0]["delta"]["content"] == FOOTER  # the last delta, alone
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["total_tokens"] == 15
    assert last["web_search"][0]["link"] == "https://weather.example.org/nanaimo"
    assert last["reply"]["content"] == "Light rain and 9 degrees [1]."
    assert "finish_reason" not in middle[0]["choices"][0]


async def test_failure_mid_stream_is_an_error_frame_without_done(client_for: Client) -> None:
    persona = FakePersona(error=RateLimitError("busy", code="1302"), error_after=2)
    async with client_for({"scout": persona}) as client:
        response = await client.post("/v1/chat/completions", json=ask(stream=True))
    assert response.status_code == 200
    frames = chunks(response.text)
    assert frames[-1]["error"]["code"] == "1302"
    assert "[DONE]" not in frames


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [("max_rounds", "stop"), ("length", "length"), ("content_filter", "content_filter")],
)
async def test_stop_reasons_map_to_finish_reasons(
    client_for: Client, stop_reason: str, finish: str
) -> None:
    persona = FakePersona(reply=make_reply(stop_reason=stop_reason))
    async with client_for({"scout": persona}) as client:
        body = (await client.post("/v1/chat/completions", json=ask())).json()
    assert body["choices"][0]["finish_reason"] == finish
    assert body["stop_reason"] == stop_reason


async def test_official_openai_client_in_process(client_for: Client) -> None:
    async with client_for() as http:
        client = openai.AsyncOpenAI(
            api_key="unused", base_url="http://localhost/v1", http_client=http, max_retries=0
        )
        completion = await client.chat.completions.create(
            model="scout", messages=[{"role": "user", "content": "// weather?"}]
        )
        assert completion.choices[0].message.content == "Light rain and 9 degrees [1]." + FOOTER
        assert completion.model_extra is not None
        assert completion.model_extra["web_search"][0]["refer"] == "ref_1"
        stream = await client.chat.completions.create(
            model="scout", messages=[{"role": "user", "content": "// weather?"}], stream=True
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == "Light rain and 9 degrees [1]." + FOOTER


async def test_conversation_turn_get_and_delete(client_for: Client, store: SQLiteStore) -> None:
    await store.append_turn(
        "c-7", "scout", [UserMessage(content="hi"), AssistantMessage(content="hello")]
    )
    persona = FakePersona()
    async with client_for({"scout": persona}) as client:
        turn = await client.post(
            "/v1/conversations/c-7/messages", json={"persona": "scout", "content": "// weather"}
        )
        stored = await client.get("/v1/conversations/c-7")
        deleted = await client.delete("/v1/conversations/c-7")
        again = await client.delete("/v1/conversations/c-7")
        gone = await client.get("/v1/conversations/c-7")
    assert turn.status_code == 200
    body = turn.json()
    assert body["conversation_id"] == "c-7"
    assert body["persona"] == "scout"
    assert body["citations"][0]["url"] == "https://weather.example.org/nanaimo"
    assert persona.calls == [("// weather", "c-7")]
    messages = stored.json()["messages"]
    assert [(m["role"], m["content"], m["turn"]) for m in messages] == [
        ("user", "hi", 1),
        ("assistant", "hello", 1),
    ]
    assert (deleted.status_code, again.status_code, gone.status_code) == (204, 404, 404)


async def test_conversation_stream(client_for: Client) -> None:
    async with client_for() as client:
        response = await client.post(
            "/v1/conversations/c-8/messages",
            json={"persona": "scout", "content": "// weather", "stream": True},
        )
    frames = chunks(response.text)
    assert frames[0]["conversation_id"] == "c-8"
    assert frames[-2]["reply"]["citations"][0]["number"] == 1


@pytest.mark.parametrize("bad", ["a.b", "x" * 129, "%2e%2e", "a%2Fb", "a b"])
async def test_conversation_ids_are_strict(client_for: Client, bad: str) -> None:
    async with client_for() as client:
        got = await client.get(f"/v1/conversations/{bad}")
        posted = await client.post(
            f"/v1/conversations/{bad}/messages", json={"persona": "scout", "content": "hi"}
        )
    assert got.status_code in (400, 404)
    assert posted.status_code in (400, 404)
    assert got.json()["error"]["code"] in ("invalid_conversation_id", "not_found")


async def test_turn_request_rejects_unknown_fields_and_long_content(client_for: Client) -> None:
    async with client_for(bot_max_message_chars=10) as client:
        extra = await client.post(
            "/v1/conversations/c/messages", json={"persona": "scout", "content": "hi", "x": 1}
        )
        long = await client.post(
            "/v1/conversations/c/messages", json={"persona": "scout", "content": "y" * 11}
        )
    assert extra.status_code == 400
    assert long.status_code == 400
    assert "BOT_MAX_MESSAGE_CHARS" in long.json()["error"]["message"]


async def test_page_and_assets_are_served_with_a_strict_policy(client_for: Client) -> None:
    async with client_for(bot_api_token="secret-token-1") as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
        style = await client.get("/static/style.css")
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert 'id="search"' in page.text and "//" in page.text
    assert script.status_code == 200 and "getReader" in script.text
    assert style.status_code == 200


async def test_an_empty_message_list_is_refused_in_plain_words(client_for: Client) -> None:
    async with client_for() as client:
        response = await client.post(
            "/v1/chat/completions", json={"model": "scout", "messages": []}
        )
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "messages: must not be empty (send at least one message; the last one "
            "must have role 'user')",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "empty_messages",
        }
    }


async def test_the_favicon_is_served_within_the_page_policy(client_for: Client) -> None:
    async with client_for(bot_api_token="secret-token-1") as client:
        icon = await client.get("/favicon.ico")
        linked = await client.get("/static/favicon.svg")
        page = await client.get("/")
    assert icon.status_code == 200 and linked.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert icon.content == linked.content and icon.content.startswith(b"<svg")
    assert "img-src 'self'" in page.headers["content-security-policy"]
    assert 'rel="icon" href="/static/favicon.svg"' in page.text
