"""Safe without a token: the Host allowlist, the Origin check and JSON-only state changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from service_fakes import TOKEN, FakePersona

Client = Callable[..., httpx.AsyncClient]
JSON = {"Content-Type": "application/json"}
ASK = {"model": "scout", "messages": [{"role": "user", "content": "hi"}]}
TURN = {"persona": "scout", "content": "hi"}


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


# ------------------------------------------------------------------------------ Host


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8080", "127.0.0.1:9", "127.0.0.2", "[::1]:8080", "LOCALHOST."]
)
async def test_loopback_hosts_are_allowed_on_any_port(client_for: Client, host: str) -> None:
    async with client_for() as client:
        response = await client.get("/v1/models", headers={"Host": host})
    assert response.status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "192.168.1.5", "[::2]"])
async def test_another_host_is_refused_without_a_token(client_for: Client, host: str) -> None:
    persona = FakePersona()
    async with client_for({"scout": persona}) as client:
        page = await client.get("/", headers={"Host": host})
        ask = await client.post("/v1/chat/completions", json=ASK, headers={"Host": host})
    for response in (page, ask):
        assert response.status_code == 400
        assert error_code(response) == "host_not_allowed"
        assert "BOT_ALLOWED_HOSTS" in response.json()["error"]["message"]
    assert persona.calls == []


async def test_probes_answer_whatever_the_host(client_for: Client) -> None:
    async with client_for() as client:
        for path in ("/healthz", "/readyz"):
            response = await client.get(path, headers={"Host": "172.18.0.4:8080"})
            assert response.status_code == 200, path


async def test_metrics_answer_a_scraper_naming_a_replica_by_address_only_with_a_token(
    client_for: Client,
) -> None:
    replica = {"Host": "172.29.76.130:8080"}
    auth = {"Authorization": f"Bearer {TOKEN}", **replica}
    async with client_for(bot_api_token=TOKEN, bot_allowed_hosts="bot,proxy") as client:
        assert (await client.get("/metrics", headers=auth)).status_code == 200
        assert (await client.get("/metrics", headers=replica)).status_code == 401
        assert (await client.get("/v1/models", headers=auth)).status_code == 400
    async with client_for() as client:  # no token: /metrics is open, so the Host check stays
        response = await client.get("/metrics", headers=replica)
        assert response.status_code == 400 and error_code(response) == "host_not_allowed"


async def test_allowed_hosts_adds_names_and_star_allows_any(client_for: Client) -> None:
    async with client_for(bot_allowed_hosts="bot,chat.example.com") as client:
        for host in ("bot:8080", "chat.example.com", "localhost:1"):
            response = await client.get("/v1/models", headers={"Host": host})
            assert response.status_code == 200, host
        other = await client.get("/v1/models", headers={"Host": "proxy"})
        assert other.status_code == 400
    async with client_for(bot_allowed_hosts="*") as client:
        response = await client.get("/v1/models", headers={"Host": "anything.example"})
        assert response.status_code == 200


async def test_with_a_token_api_clients_are_unchanged(client_for: Client) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with client_for(bot_api_token=TOKEN) as client:
        named = await client.post(
            "/v1/chat/completions", json=ASK, headers={**auth, "Host": "bot.internal:8080"}
        )
        # A token client may send any body type it sent before; the body must still be JSON.
        plain = await client.post(
            "/v1/chat/completions",
            content=httpx.Request("POST", "/", json=ASK).content,
            headers={**auth, "Content-Type": "text/plain"},
        )
    assert named.status_code == 200
    assert plain.status_code == 200
    # BOT_ALLOWED_HOSTS turns the Host check on with a token too.
    async with client_for(bot_api_token=TOKEN, bot_allowed_hosts="bot") as client:
        wrong = await client.get("/v1/models", headers={**auth, "Host": "evil.example"})
        right = await client.get("/v1/models", headers={**auth, "Host": "bot:8080"})
    assert (wrong.status_code, right.status_code) == (400, 200)


# ------------------------------------------------------------------------------ Origin


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "http://localhost:9999", "https://localhost", "null", "garbage"],
)
async def test_another_sites_origin_is_refused(client_for: Client, origin: str) -> None:
    persona = FakePersona()
    async with client_for({"scout": persona}) as client:
        post = await client.post("/v1/chat/completions", json=ASK, headers={"Origin": origin})
        read = await client.get("/v1/conversations/c1", headers={"Origin": origin})
    for response in (post, read):
        assert response.status_code == 403
        assert error_code(response) == "origin_not_allowed"
        assert "BOT_CORS_ORIGINS" in response.json()["error"]["message"]
    assert persona.calls == []


@pytest.mark.parametrize(
    ("host", "origin", "extra"),
    [
        ("localhost", "http://localhost", {}),
        ("localhost:8080", "http://localhost:8080", {}),
        ("127.0.0.1:8080", "http://127.0.0.1:8080", {}),
        ("[::1]:8080", "http://[::1]:8080", {}),
        # Behind a TLS proxy: the page's origin is https, the proxy says so.
        ("chat.example.com", "https://chat.example.com", {"X-Forwarded-Proto": "https"}),
    ],
)
async def test_the_bots_own_page_may_post(
    client_for: Client, host: str, origin: str, extra: dict[str, str]
) -> None:
    headers = {"Host": host, "Origin": origin, **JSON, **extra}
    async with client_for(bot_allowed_hosts="chat.example.com") as client:
        page = await client.get("/", headers={"Host": host})
        turn = await client.post("/v1/conversations/c1/messages", json=TURN, headers=headers)
        deleted = await client.delete("/v1/conversations/c1", headers=headers)
    assert page.status_code == 200
    assert turn.status_code == 200, turn.text
    # The scripted persona stores nothing: the DELETE reached the endpoint, which found none.
    assert (deleted.status_code, error_code(deleted)) == (404, "conversation_not_found")


async def test_cors_origins_pass_the_origin_check(client_for: Client) -> None:
    app_origin = {"Origin": "https://app.example"}
    async with client_for(bot_cors_origins="https://app.example") as client:
        allowed = await client.post("/v1/chat/completions", json=ASK, headers=app_origin)
        preflight = await client.options(
            "/v1/chat/completions",
            headers={**app_origin, "Access-Control-Request-Method": "POST"},
        )
        other = await client.post(
            "/v1/chat/completions", json=ASK, headers={"Origin": "https://evil.example"}
        )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert preflight.status_code == 200
    assert other.status_code == 403
    async with client_for(bot_cors_origins="*") as client:
        anyone = await client.post("/v1/chat/completions", json=ASK, headers=app_origin)
    assert anyone.status_code == 200


# ------------------------------------------------------------------------------ JSON only


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b'{"model": "scout", "messages": [{"role": "user", "content": "hi"}]}'),
        ("application/x-www-form-urlencoded", b"model=scout&messages=hi"),
        ("multipart/form-data; boundary=x", b"--x\r\n\r\nhi\r\n--x--\r\n"),
        (None, b'{"model": "scout"}'),
        ("application/jsonp", b"{}"),
    ],
)
async def test_simple_cross_site_posts_are_refused(
    client_for: Client, content_type: str | None, body: bytes
) -> None:
    persona = FakePersona()
    headers = {"Content-Type": content_type} if content_type else {}
    async with client_for({"scout": persona}) as client:
        stateless = await client.post("/v1/chat/completions", content=body, headers=headers)
        turn = await client.post("/v1/conversations/c1/messages", content=body, headers=headers)
    for response in (stateless, turn):
        assert response.status_code == 415
        assert error_code(response) == "unsupported_media_type"
        assert "application/json" in response.json()["error"]["message"]
    assert persona.calls == []


async def test_a_method_or_path_no_route_takes_is_the_routers_405_or_404(
    client_for: Client,
) -> None:
    async with client_for() as client:
        put = await client.put("/healthz")
        nowhere = await client.post("/v1/no-such-endpoint", content=b"x")
        form = await client.post("/v1/chat/completions", content=b"x")
    assert put.status_code == 405
    assert set(put.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert nowhere.status_code == 404
    assert form.status_code == 415  # the route takes POST: refused before its body is read


async def test_json_with_parameters_and_bare_deletes_are_accepted(client_for: Client) -> None:
    async with client_for() as client:
        charset = {"Content-Type": "Application/JSON; charset=utf-8"}
        answered = await client.post(
            "/v1/chat/completions",
            content=httpx.Request("POST", "/", json=ASK).content,
            headers=charset,
        )
        # A DELETE without a body: no content type needed (it cannot be sent across sites
        # without a CORS preflight); one with a body of another type is refused.
        bare = await client.delete("/v1/conversations/nothing")
        typed = await client.request(
            "DELETE",
            "/v1/conversations/nothing",
            content=b"x",
            headers={"Content-Type": "text/plain"},
        )
    assert answered.status_code == 200
    assert (bare.status_code, error_code(bare)) == (404, "conversation_not_found")
    assert typed.status_code == 415


async def test_reads_need_no_content_type(client_for: Client) -> None:
    async with client_for() as client:
        responses: list[Any] = [
            await client.get(path) for path in ("/", "/v1/models", "/openapi.json", "/healthz")
        ]
    assert [r.status_code for r in responses] == [200, 200, 200, 200]
