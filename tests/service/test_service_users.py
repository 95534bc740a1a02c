"""Users and keys in the service: who may read or change which conversation.

The matrix: every conversation endpoint x {own, another user's, no key, wrong key, revoked
key, expired key, admin with and without ``?user=``}, on SQLite and on PostgreSQL, checking the
status and that nothing of another user's is returned or changed. Turns run a real persona on
a scripted model (:class:`~generic_framework.testing.FunctionModel`), stored in a real store.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import every_upstream_reachable

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.service.readiness import UpstreamProbe
from generic_framework.store import ConversationStore, open_store
from generic_framework.store.users import Limits, conversation_key
from generic_framework.testing import FunctionModel
from generic_framework.wire.messages import ChatRequest

TOKEN = "bootstrap-token-0123456789"
LONG_AGO = "2020-01-01T00:00:00.000+00:00"


def _echo(request: ChatRequest) -> str:
    return f"echo: {request.messages[-1].content}"


@dataclass
class World:
    """An app with users alice, bob (keys of each) and the admin's token."""

    client: Callable[[str | None], httpx.AsyncClient]
    store: ConversationStore
    keys: dict[str, str]
    model: FunctionModel
    ids: dict[str, str]


@pytest.fixture(params=["sqlite", "postgres"])
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_server").create_database()
    else:
        url = str(tmp_path / "data" / "conversations.sqlite3")
    store = open_store(url, sqlite_path="unused", pool_size=4)
    await store.open()
    alice = await store.add_user("alice")
    bob = await store.add_user("bob")
    keys = {
        "alice": (await store.create_key(alice.id))[1],
        "bob": (await store.create_key(bob.id))[1],
        "revoked": (await store.create_key(alice.id))[1],
        "expired": (await store.create_key(alice.id, expires_at=LONG_AGO))[1],
        "wrong": (await store.create_key(alice.id))[1][:-4] + "AAAA",
        "admin": TOKEN,
    }
    revoked = keys["revoked"].split("_")[1]
    await store.revoke_key(revoked)
    settings = Settings.defaults(
        api_key="k", data_dir=tmp_path / "data", personas_dir=tmp_path / "p", bot_api_token=TOKEN
    )
    model = FunctionModel(_echo)
    runtime = Runtime(settings, store=store, model=model)
    persona = Persona("scout", "You scout.", runtime=runtime)
    app = create_app(
        runtime=runtime,
        personas={"scout": persona},
        upstream_probe=UpstreamProbe(settings, connect=every_upstream_reachable),
    )
    clients: list[httpx.AsyncClient] = []

    def client(who: str | None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {keys[who]}"} if who else {}
        made = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost", headers=headers
        )
        clients.append(made)
        return made

    yield World(client, store, keys, model, {"alice": alice.id, "bob": bob.id})
    for made in clients:
        await made.aclose()
    await runtime.aclose()
    await store.aclose()


async def _turn(world: World, who: str, cid: str, text: str, query: str = "") -> httpx.Response:
    return await world.client(who).post(
        f"/v1/conversations/{cid}/messages{query}", json={"persona": "scout", "content": text}
    )


async def _snapshot(store: ConversationStore) -> dict[str, Any]:
    return {cid: await store.dump(cid) for cid in await store.conversation_ids()}


async def test_two_users_each_have_their_own_chat_1(world: World) -> None:
    assert (await _turn(world, "alice", "chat-1", "alice's secret")).status_code == 200
    assert (await _turn(world, "bob", "chat-1", "bob's question")).status_code == 200
    assert (await _turn(world, "admin", "chat-1", "the admin's")).status_code == 200
    for who, own, others in (
        ("alice", "alice's secret", ("bob's question", "the admin's")),
        ("bob", "bob's question", ("alice's secret", "the admin's")),
        ("admin", "the admin's", ("alice's secret", "bob's question")),
    ):
        got = (await world.client(who).get("/v1/conversations/chat-1")).text
        listed = (await world.client(who).get("/v1/conversations")).json()
        assert own in got and not any(o in got for o in others)
        assert [c["id"] for c in listed["data"]] == ["chat-1"]
        assert own in listed["data"][0]["title"]
    key = conversation_key(world.ids["alice"], "chat-1")
    turns = await world.store.turns(key)
    assert turns is not None and turns[0].record is not None
    assert turns[0].record.user_id == world.ids["alice"]
    assert turns[0].record.key_id == world.keys["alice"].split("_")[1]


ENDPOINTS = [
    ("GET", "/v1/conversations/chat-1", None),
    ("PATCH", "/v1/conversations/chat-1", {"title": "renamed"}),
    ("DELETE", "/v1/conversations/chat-1/turns/last", None),
    ("DELETE", "/v1/conversations/chat-1", None),
    ("POST", "/v1/conversations/chat-1/messages", {"persona": "scout", "content": "more"}),
    (
        "POST",
        "/v1/chat/completions",
        {
            "model": "scout",
            "conversation_id": "chat-1",
            "messages": [{"role": "user", "content": "more"}],
        },
    ),
    ("GET", "/v1/conversations", None),
]
# who asks, the query, and the status: own is alice's chat-1; "other" is bob asking for the
# same id (his does not exist: 404 exactly as a missing one, existence not revealed).
CASES = {
    "own": ("alice", "", "ok"),
    "another user's": ("bob", "", "missing"),
    "another user's via ?user=": ("bob", "?user=alice", 403),
    "no key": (None, "", 401),
    "wrong key": ("wrong", "", 401),
    "revoked key": ("revoked", "", 401),
    "expired key": ("expired", "", 401),
    "admin without ?user=": ("admin", "", "missing"),
    "admin with ?user=": ("admin", "?user=alice", "ok"),
}


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
@pytest.mark.parametrize("case", list(CASES))
async def test_the_matrix(
    world: World, method: str, path: str, body: dict[str, Any] | None, case: str
) -> None:
    assert (await _turn(world, "alice", "chat-1", "first secret")).status_code == 200
    assert (await _turn(world, "alice", "chat-1", "second secret")).status_code == 200
    who, query, expected = CASES[case]
    before = await _snapshot(world.store)
    calls = len(world.model.requests)
    response = await world.client(who).request(method, path + query, json=body)
    after = await _snapshot(world.store)
    listing = path == "/v1/conversations"
    if expected == "ok":
        assert response.status_code in (200, 204), response.text
        if method == "GET":
            assert "first secret" in response.text
        return
    if expected == "missing":
        if listing:  # the list answers, without alice's conversation
            assert response.status_code == 200
            assert "secret" not in response.text
        elif method == "POST":  # a new conversation of the asker's own
            assert response.status_code == 200, response.text
            assert "secret" not in response.text
            alices = conversation_key(world.ids["alice"], "chat-1")
            assert after[alices] == before[alices]
            return
        else:
            assert response.status_code == 404, response.text
            assert response.json()["error"]["code"] == "conversation_not_found"
            assert response.json()["error"]["message"] == "no conversation 'chat-1'"
    else:
        assert response.status_code == expected, response.text
        assert "secret" not in response.text
        if expected == 401:
            assert response.headers["www-authenticate"].startswith("Bearer")
            message = response.json()["error"]["message"]
            assert all(k not in message for k in world.keys.values())
    assert after == before
    assert len(world.model.requests) == calls


async def test_a_missing_and_anothers_conversation_answer_alike(world: World) -> None:
    await _turn(world, "alice", "chat-1", "secret")
    theirs = await world.client("bob").get("/v1/conversations/chat-1")
    nobodys = await world.client("bob").get("/v1/conversations/chat-404")
    assert theirs.status_code == nobodys.status_code == 404
    assert theirs.json()["error"]["code"] == nobodys.json()["error"]["code"]
    assert theirs.headers.keys() == nobodys.headers.keys()


async def test_admin_acts_on_a_user_only_by_name(world: World) -> None:
    await _turn(world, "alice", "chat-1", "secret")
    admin = world.client("admin")
    assert (await admin.get("/v1/conversations/chat-1?user=nobody")).status_code == 404
    listed = (await admin.get("/v1/conversations?user=alice")).json()
    assert [c["id"] for c in listed["data"]] == ["chat-1"]
    turn = await _turn(world, "admin", "chat-1", "from the admin", "?user=alice")
    assert turn.status_code == 200
    got = (await world.client("alice").get("/v1/conversations/chat-1")).json()
    assert [m["content"] for m in got["messages"] if m["role"] == "user"] == [
        "secret",
        "from the admin",
    ]


async def test_a_key_with_a_persona_allowlist(world: World) -> None:
    limited = (await world.store.create_key(world.ids["bob"], personas=("other",)))[1]
    world.keys["limited"] = limited
    models = (await world.client("limited").get("/v1/models")).json()
    assert models["data"] == []
    refused = await _turn(world, "limited", "c", "hi")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "persona_not_allowed"


async def test_streamed_turns_stay_in_the_owners_conversation(world: World) -> None:
    async with world.client("bob").stream(
        "POST",
        "/v1/chat/completions",
        json={
            "model": "scout",
            "stream": True,
            "conversation_id": "s-1",
            "messages": [{"role": "user", "content": "streamed"}],
        },
    ) as response:
        body = "".join([chunk async for chunk in response.aiter_text()])
    assert response.status_code == 200 and "echo: streamed" in body
    frames = [json.loads(f[6:]) for f in body.split("\n\n") if f.startswith("data: {")]
    assert {f.get("conversation_id") for f in frames} - {None} == {"s-1"}
    assert world.ids["bob"] not in body  # the store's key never shows
    assert await world.store.turns(conversation_key(world.ids["bob"], "s-1"))
    assert await world.store.turns("s-1") is None
    assert (await world.client("alice").get("/v1/conversations/s-1")).status_code == 404


ADMIN_ONLY = [
    ("GET", "/v1/admin/users", None),
    ("POST", "/v1/admin/users", {"name": "mallory"}),
    ("GET", "/v1/admin/users/alice", None),
    ("PATCH", "/v1/admin/users/bob", {"role": "admin"}),
    ("DELETE", "/v1/admin/users/alice", None),
    ("GET", "/v1/admin/keys", None),
    ("POST", "/v1/admin/keys", {"user": "bob"}),
    ("DELETE", "/v1/admin/keys/000000000000", None),
    ("GET", "/metrics", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ONLY)
async def test_admin_endpoints_refuse_users(
    world: World, method: str, path: str, body: dict[str, Any] | None
) -> None:
    before = (await world.store.dump_accounts(), await _snapshot(world.store))
    response = await world.client("bob").request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert response.json()["error"]["type"] == "permission_error"
    assert (await world.store.dump_accounts(), await _snapshot(world.store)) == before
    assert (await world.client(None).request(method, path, json=body)).status_code == 401


async def test_admins_manage_users_and_keys_over_http(world: World) -> None:
    admin = world.client("admin")
    made = await admin.post("/v1/admin/users", json={"name": "carol", "rpm": 5})
    assert made.status_code == 201 and made.json()["limits"]["rpm"] == 5
    assert (await admin.post("/v1/admin/users", json={"name": "carol"})).status_code == 409
    assert (await admin.post("/v1/admin/users", json={"name": "a b"})).status_code == 400
    changed = await admin.patch("/v1/admin/users/carol", json={"daily_tokens": 100})
    assert changed.json()["limits"] == {"rpm": 5, "daily_tokens": 100, "daily_searches": None}
    created = await admin.post(
        "/v1/admin/keys", json={"user": "carol", "expires_days": 1, "personas": ["scout"]}
    )
    assert created.status_code == 201
    record = created.json()
    world.keys["carol"] = record["key"]
    assert record["key"].startswith(f"gfk_{record['id']}_") and record["personas"] == ["scout"]
    me = (await world.client("carol").get("/v1/me")).json()
    assert me["user"]["name"] == "carol" and me["via"] == "key" and me["key"]["id"] == record["id"]
    listed = (await admin.get("/v1/admin/keys?user=carol")).json()
    assert [k["id"] for k in listed["data"]] == [record["id"]]
    assert record["key"] not in json.dumps(listed)
    assert (await admin.delete(f"/v1/admin/keys/{record['id']}")).status_code == 204
    assert (await admin.delete(f"/v1/admin/keys/{record['id']}")).status_code == 404
    assert (await world.client("carol").get("/v1/me")).status_code == 401
    assert (await admin.delete("/v1/admin/users/admin")).status_code == 409
    assert (await admin.patch("/v1/admin/users/admin", json={"rpm": 1})).status_code == 409
    assert (await admin.delete("/v1/admin/users/carol")).status_code == 204
    assert (await admin.get("/v1/admin/users/carol")).status_code == 404
    names = [u["name"] for u in (await admin.get("/v1/admin/users")).json()["data"]]
    assert names == ["admin", "alice", "bob"]


async def test_request_fields_outside_the_schema_are_refused(world: World) -> None:
    admin = world.client("admin")
    for query in ("bogus=1", "limit=5&bogus=1", "limit=5&Limit=6"):
        refused = await admin.get(f"/v1/conversations?{query}")
        assert refused.status_code == 400, (query, refused.text)
        assert "unknown query parameter" in refused.json()["error"]["message"]
    # One value per parameter: which of two would count is not for the server to guess.
    twice = await admin.get("/v1/conversations?limit=5&limit=6")
    assert twice.status_code == 400 and twice.json()["error"]["param"] == "limit", twice.text
    # A number, not a boolean or a string standing for one; nothing is made.
    for days in (True, False, "1", [1]):
        body = {"user": "dave", "expires_days": days}
        refused = await admin.post("/v1/admin/keys", json=body)
        assert refused.status_code == 400, (days, refused.text)
        assert refused.json()["error"]["param"] == "expires_days", refused.text
    assert (await admin.get("/v1/admin/users/dave")).status_code == 404
    made = await admin.post("/v1/admin/keys", json={"user": "dave", "expires_days": 1.5})
    assert made.status_code == 201, made.text


async def test_a_chat_platform_user_is_managed_by_its_name_with_a_colon(world: World) -> None:
    admin = world.client("admin")
    made = await admin.post("/v1/admin/users", json={"name": "telegram:42"})
    assert made.status_code == 201, made.text
    changed = await admin.patch("/v1/admin/users/telegram:42", json={"rpm": 3})
    assert changed.status_code == 200 and changed.json()["limits"]["rpm"] == 3
    listed = await admin.get("/v1/conversations?user=telegram%3A42")
    assert listed.status_code == 200 and listed.json()["data"] == []
    assert (await admin.post("/v1/admin/users", json={"name": "telegram/42"})).status_code == 400
    assert (await admin.delete("/v1/admin/users/telegram:42")).status_code == 204


async def test_me_tells_who_and_what_is_left(world: World) -> None:
    await world.store.set_user("alice", limits=Limits(daily_tokens=1000, daily_searches=3))
    await _turn(world, "alice", "c", "hello there")
    me = (await world.client("alice").get("/v1/me")).json()
    assert me["user"]["name"] == "alice" and me["user"]["role"] == "user"
    assert me["via"] == "key" and me["limits"]["daily_tokens"] == 1000
    assert 0 < me["today"]["tokens"] < 1000
    assert me["today"]["tokens_left"] == 1000 - me["today"]["tokens"]
    assert me["today"]["searches_left"] == 3
    admin = (await world.client("admin").get("/v1/me")).json()
    assert admin["user"]["name"] == "admin" and admin["via"] == "token" and admin["key"] is None
    assert admin["today"]["tokens_left"] is None


async def test_requests_per_minute_per_user_and_per_key(world: World) -> None:
    await world.store.set_user("alice", limits=Limits(rpm=2))
    assert [(await _turn(world, "alice", "c", "hi")).status_code for _ in range(2)] == [200, 200]
    refused = await _turn(world, "alice", "c", "hi")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "user_rpm" and error["type"] == "rate_limit_error"
    assert "2 requests per minute" in error["message"]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    # A key's own limit applies within the user's.
    keyed = (await world.store.create_key(world.ids["bob"], limits=Limits(rpm=1)))[1]
    world.keys["keyed"] = keyed
    assert (await _turn(world, "keyed", "c", "hi")).status_code == 200
    second = await _turn(world, "keyed", "c", "hi")
    assert second.status_code == 429 and second.json()["error"]["code"] == "key_rpm"
    assert (await _turn(world, "bob", "c", "hi")).status_code == 200  # bob's other key


async def test_daily_tokens_and_searches(world: World) -> None:
    await world.store.set_user("alice", limits=Limits(daily_tokens=5, daily_searches=1))
    assert (await _turn(world, "alice", "c", "a long enough question")).status_code == 200
    refused = await _turn(world, "alice", "c", "again")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "user_daily_tokens"
    assert refused.json()["error"]["type"] == "insufficient_quota"
    assert 1 <= int(refused.headers["retry-after"]) <= 86400
    await world.store.set_user("bob", limits=Limits(daily_searches=1))
    await world.store.add_usage((f"u:{world.ids['bob']}",), 0, 1)
    web = await _turn(world, "bob", "c", "// news?")
    assert web.status_code == 429 and web.json()["error"]["code"] == "user_daily_searches"
    assert (await _turn(world, "bob", "c", "no search")).status_code == 200


async def test_default_limits_apply_to_users_not_admins(world: World, tmp_path: Path) -> None:
    settings = Settings.defaults(
        api_key="k", data_dir=tmp_path / "data", personas_dir=tmp_path / "p",
        bot_api_token=TOKEN, bot_default_rpm=1,
    )  # fmt: skip
    from generic_framework.quotas import effective_limits

    alice = await world.store.user("alice")
    admin = await world.store.user("admin")
    assert alice is not None and admin is not None
    assert effective_limits(alice, settings).rpm == 1
    assert effective_limits(admin, settings).rpm == 0
