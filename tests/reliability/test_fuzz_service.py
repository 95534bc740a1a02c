"""Property: no request body, path or header makes the service fail; every refusal is a 4xx.

Hypothesis sends generated requests to the app in-process (httpx's ASGI transport, which
raises any exception the app lets escape): valid bodies with one value replaced, dropped or
added, arbitrary JSON, arbitrary bytes; conversation ids of any text in the path; arbitrary
header values. The personas apply the library's own edge checks (the text and the
conversation id, as :meth:`Persona.respond` does), so a value the service let through but the
persona would refuse shows up as a failure too. Schemathesis (``test_fuzz_openapi.py``) covers
the documented contract; this covers what the contract does not describe.

A failure prints the request hypothesis found (method, path, headers, body).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st
from service_fakes import TOKEN, FakePersona
from starlette.applications import Starlette

from generic_framework.config import Settings
from generic_framework.core.events import PersonaEvent
from generic_framework.core.history import foreign_history
from generic_framework.limits import CONVERSATION_ID_PATTERN, check_text
from generic_framework.runtime import Runtime
from generic_framework.service import create_app
from generic_framework.store import SQLiteStore
from generic_framework.store.users import check_conversation_key

EXAMPLES = 500
"""About 3 s: each example is one in-process request."""


class CheckingPersona(FakePersona):
    """A scripted persona that refuses what a real one refuses, before answering."""

    def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        options: Any = None,
        caller: Any = None,
    ) -> AsyncGenerator[PersonaEvent, None]:
        check_text(text)
        if conversation_id is not None:
            check_conversation_key(conversation_id)
        if history is not None:
            foreign_history(history)
        return super().stream(
            text, conversation_id=conversation_id, history=history, options=options, caller=caller
        )


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starlette]:
    data = tmp_path_factory.mktemp("fuzz-service")
    store = SQLiteStore(Path(data) / "conversations.sqlite3")
    app_settings = Settings.defaults(
        api_key="fuzz-key",
        bot_api_token=TOKEN,
        data_dir=data,
        bot_max_body=4096,
        bot_max_message_chars=500,
    )
    personas = {"scout": CheckingPersona(), "helper": CheckingPersona("helper")}
    yield create_app(runtime=Runtime(app_settings, store=store), personas=personas)
    store.close()


def send(
    app: Starlette, method: str, path: str, headers: dict[str, bytes], body: bytes
) -> httpx.Response:
    """One request to ``app`` in-process; an exception the app lets escape is raised here."""

    async def request() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=True)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, headers=headers, content=body)

    return asyncio.run(request())


# ------------------------------------------------------------------------------ strategies

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.sampled_from(["yes", "true", "1", "", "scout", "user", "// hi", "\u2028", "a\x00b"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": JSON}
)
CHAT = {
    "model": "scout",
    "messages": [{"role": "user", "content": "// hi"}],
    "stream": False,
    "conversation_id": "c1",
}
TURN = {"persona": "scout", "content": "hi", "stream": False}


IDS = st.one_of(
    st.sampled_from(["c1", "", "..", "a.b", "x" * 128, "x" * 129, "a/b", "\u00e9", "a b"]),
    st.text(max_size=20),
)
TEXTS = st.one_of(
    st.sampled_from(["", " ", "//", "// hi", "x" * 501, "\x00", "\u2028"]), st.text(max_size=40)
)
NAMES = st.one_of(st.sampled_from(["scout", "helper", "", "../x", "x" * 300]), st.text(max_size=10))
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "model": st.one_of(NAMES, JSON),
    "persona": st.one_of(NAMES, JSON),
    "messages": st.one_of(st.lists(MESSAGE, max_size=3), JSON),
    "content": st.one_of(TEXTS, JSON),
    "stream": st.one_of(st.booleans(), JSON),
    "conversation_id": st.one_of(IDS, JSON),
    "extra": JSON,
}


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """``valid`` with one or two keys replaced by a value of their kind or any JSON, dropped,
    or added; now and then not JSON at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(JSON.map(json.dumps).map(str.encode), st.binary(max_size=200)))
    body = dict(valid)
    keys = st.sampled_from([*valid, "extra"])
    for key in draw(st.lists(keys, min_size=1, max_size=draw(st.sampled_from([1, 1, 2])))):
        if draw(st.integers(0, 5)) == 0:
            body.pop(key, None)
        else:
            body[key] = draw(FIELD_VALUES[key])
    return json.dumps(body).encode()


PATH_IDS = st.one_of(
    st.from_regex(CONVERSATION_ID_PATTERN, fullmatch=True),
    st.sampled_from(["c1", "..", "a.b", "x" * 129, "a%2Fb", "%00", "%ff"]),
    st.text(min_size=1, max_size=20).map(lambda t: urllib.parse.quote(t, safe="")),
)
HEADER_VALUE = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"),
    max_size=40,
)
HEADERS = st.dictionaries(
    st.sampled_from(["content-type", "accept", "origin", "x-request-id", "cookie"]),
    HEADER_VALUE,
    max_size=3,
)
AUTHORIZATION = st.one_of(
    st.just(f"Bearer {TOKEN}"),
    st.just(f"bearer {TOKEN}"),
    st.sampled_from(["", "Bearer", f"Bearer {TOKEN}x", "Basic abc", f"Bearer  {TOKEN}"]),
    HEADER_VALUE,
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], bytes]:
    """A request: mostly near-valid turns, also reads, deletes and wrong methods."""
    conversation = draw(PATH_IDS)
    kind = draw(st.sampled_from(["chat", "chat", "turn", "turn", "get", "delete", "other"]))
    body = b""
    if kind == "chat":
        method, path, body = "POST", "/v1/chat/completions", draw(mutated(CHAT))
    elif kind == "turn":
        path = f"/v1/conversations/{conversation}/messages"
        method, body = "POST", draw(mutated(TURN))
    elif kind in ("get", "delete"):
        method, path = kind.upper(), f"/v1/conversations/{conversation}"
    else:
        method, path = draw(st.sampled_from([("GET", "/v1/models"), ("PUT", "/v1/models")]))
    # Mostly the right token, so most requests get past authentication.
    token = draw(AUTHORIZATION) if draw(st.integers(0, 7)) == 0 else f"Bearer {TOKEN}"
    return method, path, {"authorization": token, **draw(HEADERS)}, body


# ------------------------------------------------------------------------------ the property


def _check_response(status: int, content_type: str, body: bytes) -> None:
    assert status < 500, (status, body[:300])
    assert b"Traceback" not in body
    if status >= 400:
        error = json.loads(body)["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert isinstance(error["message"], str) and error["message"]
    elif status != 204:
        assert content_type.startswith(("application/json", "text/event-stream")), content_type


_AUTH = {"authorization": f"Bearer {TOKEN}"}


def _body(valid: dict[str, Any], **changes: Any) -> bytes:
    return json.dumps({**valid, **changes}).encode()


# Values a persona refuses, which the service must refuse first; hypothesis explores around them.
@example(request=("POST", "/v1/chat/completions", _AUTH, _body(CHAT, conversation_id="a.b")))
@example(request=("POST", "/v1/chat/completions", _AUTH, _body(CHAT, conversation_id="")))
@example(request=("POST", "/v1/conversations/a.b/messages", _AUTH, _body(TURN)))
@example(request=("POST", "/v1/conversations/c1/messages", _AUTH, _body(TURN, stream="yes")))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(request=requests())
def test_no_request_makes_the_service_fail(
    app: Starlette, request: tuple[str, str, dict[str, str], bytes]
) -> None:
    method, path, headers, body = request
    note(f"request: {method} {path} headers={headers!r} body={body!r}")
    # Header values are sent as the bytes they are (latin-1), as a raw client could.
    raw_headers = {name: value.encode("latin-1") for name, value in headers.items()}
    response = send(app, method, path, raw_headers, body)
    note(f"answer: {response.status_code} {response.content[:300]!r}")
    content_type = response.headers.get("content-type", "")
    _check_response(response.status_code, content_type, response.content)


def test_the_property_sees_refusals_and_answers(app: Starlette) -> None:
    """The generated requests reach both sides: some are answered, some refused."""
    auth = {"authorization": f"Bearer {TOKEN}".encode()}
    ok = send(app, "POST", "/v1/chat/completions", auth, json.dumps(CHAT).encode())
    yes = json.dumps({**CHAT, "stream": "yes"}).encode()
    refused = send(app, "POST", "/v1/chat/completions", auth, yes)
    assert ok.status_code == 200
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "bool_type")
