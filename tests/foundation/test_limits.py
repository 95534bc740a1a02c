"""The shared value rules: each accepts and refuses what it says; every edge uses the same one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from generic_framework.limits import (
    CONVERSATION_ID_PATTERN,
    BaseURL,
    ConversationId,
    check_base_url,
    check_bind_host,
    check_conversation_id,
    check_model_id,
    check_persona_name,
    check_port,
    check_text,
    shown,
)
from generic_framework.service.schemas import ChatCompletionRequest
from generic_framework.store import SQLiteStore
from generic_framework.wire.messages import UserMessage


def refuses(check: object, value: object) -> bool:
    try:
        check(value)  # type: ignore[operator]
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("value", ["a", "c-1", "u42", "A_b-9", "x" * 128])
def test_conversation_ids_that_are_plain_names_pass(value: str) -> None:
    assert check_conversation_id(value) == value


@pytest.mark.parametrize(
    "value", ["", "x" * 129, "a.b", "../etc", "a/b", "a b", "\u00e9t\u00e9", "a\x00", "\udcff"]
)
def test_other_conversation_ids_are_refused_with_the_rule(value: str) -> None:
    with pytest.raises(ValueError, match=r"a conversation id must be 1-128 letters, digits"):
        check_conversation_id(value)


def test_text_that_utf8_cannot_encode_is_refused() -> None:
    assert check_text("caf\u00e9 \u2603 \U0001f600 \x00") == "caf\u00e9 \u2603 \U0001f600 \x00"
    with pytest.raises(ValueError, match="must be UTF-8 text"):
        check_text("bad \udcff\udcfe bytes")


@pytest.mark.parametrize("value", ["glm-4.7", "glm-4.5-air", "z-ai/glm-4.6", "m:1"])
def test_model_ids(value: str) -> None:
    assert check_model_id(value) == value


@pytest.mark.parametrize("value", ["", "glm 4", "glm\t4", "x" * 129, "gl\u00e9m", "a\nb"])
def test_bad_model_ids(value: str) -> None:
    assert refuses(check_model_id, value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://api.z.ai/api/paas/v4/", "https://api.z.ai/api/paas/v4"),
        ("http://127.0.0.1:8090/api/paas/v4", "http://127.0.0.1:8090/api/paas/v4"),
        ("http://[::1]:8090/v4", "http://[::1]:8090/v4"),
    ],
)
def test_base_urls_that_can_work(value: str, expected: str) -> None:
    assert check_base_url(value) == expected


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("api.z.ai/api/paas/v4", "must start with http:// or https://"),
        ("ftp://api.z.ai", "must start with http:// or https://"),
        ("http://", "has no host name"),
        ("http:///v4", "has no host name"),
        ("http://a b/v4", "must not contain spaces or control characters"),
        ("http://[::1", "is not a valid URL"),
        ("http://127.0.0.1:99999/v4", "is not a valid URL"),
        ("http://127.0.0.1:abc/v4", "is not a valid URL"),
        ("http://user:pw@host/v4", "must not hold a user name or password"),
        ("http://token@host/v4", "must not hold a user name or password"),
        ("http://host/v4?key=abc", "must not have a query string or fragment"),
        ("http://host/v4#top", "must not have a query string or fragment"),
        ("http://host/v4?", "must not have a query string or fragment"),
        ("http://h\udcff/v4", "must be UTF-8 text"),
    ],
)
def test_base_urls_that_cannot_work_say_why(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        check_base_url(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        (" 0.0.0.0 ", "0.0.0.0"),
        ("localhost", "localhost"),
        ("bot.example.org", "bot.example.org"),
    ],
)
def test_bind_hosts(value: str, expected: str) -> None:
    assert check_bind_host(value) == expected


@pytest.mark.parametrize("value", ["", "[]", "[::1", "a b", "-x.org", "x_y", "h\udcff", "a" * 300])
def test_bad_bind_hosts(value: str) -> None:
    assert refuses(check_bind_host, value)


def test_ports_and_persona_names() -> None:
    assert [check_port(p) for p in (0, 8080, 65535)] == [0, 8080, 65535]
    assert refuses(check_port, -1) and refuses(check_port, 65536)
    assert check_persona_name("scout") == "scout"
    for name in ("", "../x", ".x", "a b", "x" * 65):
        assert refuses(check_persona_name, name)


def test_shown_values_are_short() -> None:
    assert shown("abc") == "'abc'"
    long = shown("x" * 1000)
    assert long.startswith("1000 characters, starting 'xxx") and len(long) < 90


class _Body(BaseModel):
    conversation_id: ConversationId
    base_url: BaseURL = "https://api.z.ai/api/paas/v4"


def test_the_pydantic_types_carry_the_rule_and_its_message() -> None:
    with pytest.raises(ValidationError) as caught:
        _Body(conversation_id="a.b")
    (error,) = caught.value.errors()
    assert error["type"] == "invalid_conversation_id"
    assert error["msg"].startswith("a conversation id must be 1-128")
    assert _Body.model_json_schema()["properties"]["conversation_id"]["pattern"] == (
        CONVERSATION_ID_PATTERN
    )
    with pytest.raises(ValidationError, match="must not hold a user name"):
        _Body(conversation_id="a", base_url="https://u:{p}@h/")  # braces are not a template


# One rule, every edge: for any text the store, the service's body model and the rule agree.
_IDS = st.one_of(
    st.text(max_size=140),
    st.text(alphabet="ab_-.Z9/", min_size=0, max_size=130),
    st.from_regex(CONVERSATION_ID_PATTERN, fullmatch=True),
)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path_factory.mktemp("store") / "c.sqlite3")
    yield store
    store.close()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(conversation_id=_IDS)
def test_the_store_the_service_and_the_rule_refuse_the_same_ids(
    conversation_id: str, shared_store: SQLiteStore
) -> None:
    expected = refuses(check_conversation_id, conversation_id)
    body = {"model": "scout", "messages": [{"role": "user", "content": "hi"}]}
    try:
        ChatCompletionRequest.model_validate({**body, "conversation_id": conversation_id})
        service_refuses = False
    except ValidationError:
        service_refuses = True
    try:
        asyncio.run(shared_store.append_turn(conversation_id, "p", [UserMessage(content="hi")]))
        store_refuses = False
    except ValueError:
        store_refuses = True
    assert service_refuses == store_refuses == expected


def test_the_store_refuses_before_opening_anything(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "never" / "c.sqlite3")
    with pytest.raises(ValueError, match="a conversation id must be"):
        asyncio.run(store.append_turn("x" * 300, "p", [UserMessage(content="hi")]))
    assert not (tmp_path / "never").exists()
