"""Pictures through the real service and the mock Z.AI server (docs/design/0327-0329).

The service runs in-process (httpx's ASGI transport) with a real runtime and SQLite store; the
mock is a real HTTP server on loopback. Every fixture is matched whole (``system`` and
``history`` exact, and ``model`` exact), so a served exchange proves the body that went upstream,
and the mock's report counts the upstream calls.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.mock import MockServer
from generic_framework.mock.fixture import Fixture
from generic_framework.pictures.vision import DESCRIBE_PROMPT
from generic_framework.runtime import Runtime
from generic_framework.service import create_app

CHAT_PATH = "/api/paas/v4/chat/completions"
PROMPT = "You look at what you are shown."
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
DIGEST = hashlib.sha256(PNG).hexdigest()
QUESTION = "What does the sign say?"
SEEN = "It says OPEN."
DESCRIPTION = "A green sign on a door with the word OPEN in white capitals."
ANSWERED = "The sign says OPEN."
Client = Callable[..., httpx.AsyncClient]


def _answer(text: str, model: str) -> dict[str, Any]:
    return {
        "id": "req-1",
        "created": 1767950000,
        "model": model,
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def exchange(model: str, messages: list[dict[str, Any]], answer: str) -> dict[str, Any]:
    """One recorded call: the whole request body the mock must see, and its answer."""
    return {
        "request": {
            "method": "POST",
            "path": CHAT_PATH,
            "body": {"model": model, "messages": messages},
        },
        "response": {"status": 200, "headers": {}, "body": _answer(answer, model)},
    }


def strict(name: str, *exchanges: dict[str, Any]) -> Fixture:
    """A fixture whose every request is compared whole (system, history and model)."""
    return Fixture.model_validate(
        {
            "name": name,
            "persona": "seer",
            "user_input": QUESTION,
            "match": {"system": "exact", "history": "exact", "model": "exact"},
            "exchanges": list(exchanges),
        }
    )


def question_with(url: str = PNG_URL, text: str = QUESTION) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]


def described(text: str = DESCRIPTION) -> str:
    return (
        f"[Picture 1 (png, sha256 {DIGEST[:12]}), described by a vision model because this "
        f"model cannot see pictures:]\n{text}\n[End of the description]"
    )


def personas(tmp_path: Path) -> Path:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    for name, model in (("seer", "glm-4.6v"), ("reader", "glm-4.7")):
        if (folder / f"{name}.toml").exists():
            continue
        (folder / f"{name}.toml").write_text(
            f'system_prompt = "{PROMPT}"\nmodel = "{model}"\n\n[web_search]\nmode = "off"\n',
            encoding="utf-8",
        )
    return folder


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Callable[..., httpx.AsyncClient]]:
    """``service(mock, **settings)``: an httpx client to the service over ``mock``."""
    clients: list[httpx.AsyncClient] = []
    runtimes: list[Runtime] = []

    def connect(mock: MockServer, **values: Any) -> httpx.AsyncClient:
        settings = Settings.defaults(
            api_key="mock-key",
            base_url=mock.base_url,
            personas_dir=personas(tmp_path),
            data_dir=tmp_path / "data",
            **values,
        )
        runtimes.append(Runtime(settings))
        transport = httpx.ASGITransport(app=create_app(runtime=runtimes[-1]))
        clients.append(httpx.AsyncClient(transport=transport, base_url="http://localhost"))
        return clients[-1]

    yield connect
    for client in clients:
        await client.aclose()
    for runtime in runtimes:
        await runtime.aclose()


def sees_the_picture() -> Fixture:
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": question_with()}]
    return strict("vision_persona", exchange("glm-4.6v", messages, SEEN))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_picture_reaches_a_vision_persona_unchanged(service: Client, stream: bool) -> None:
    async with MockServer([sees_the_picture()]) as mock:
        client = service(mock)
        body = {"model": "seer", "messages": [{"role": "user", "content": question_with()}]}
        response = await client.post("/v1/chat/completions", json={**body, "stream": stream})
        report = mock.report()
    assert response.status_code == 200, response.text
    assert SEEN in response.text
    assert report["requests"] == 1
    assert report["unmatched_requests"] == []
    assert report["fixtures"][0]["served"] == [1]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_conversation_turn_takes_a_picture(service: Client, stream: bool) -> None:
    async with MockServer([sees_the_picture()]) as mock:
        client = service(mock)
        response = await client.post(
            "/v1/conversations/c1/messages",
            json={"persona": "seer", "content": question_with(), "stream": stream},
        )
        report = mock.report()
    assert response.status_code == 200, response.text
    assert SEEN in response.text
    assert report["requests"] == 1
    assert report["fixtures"][0]["served"] == [1]


GIF = "data:image/gif;base64," + base64.b64encode(b"GIF89a" + bytes(16)).decode()
JPEG_AS_PNG = "data:image/png;base64," + base64.b64encode(b"\xff\xd8\xff" + bytes(16)).decode()


@pytest.mark.parametrize(
    ("content", "settings", "words"),
    [
        (question_with(GIF), {}, "image/gif MIME type"),
        (question_with("data:image/png;base64,not*base64!"), {}, "not valid base64"),
        (question_with("http://example.com/a.png"), {}, "the http scheme is not taken"),
        (question_with("file:///etc/passwd"), {}, "the file scheme is not taken"),
        (question_with("data:image/png,raw"), {}, "must be base64"),
        (question_with(JPEG_AS_PNG), {}, "not a image/png picture"),
        (question_with(PNG_URL), {"bot_max_image_bytes": 16}, "BOT_MAX_IMAGE_BYTES"),
        ([*question_with(), *question_with()[1:] * 2], {"bot_max_images": 2}, "BOT_MAX_IMAGES"),
        ([{"type": "image_url", "image_url": "x"}], {}, "must be an object with a string url"),
        ([{"type": "input_audio", "input_audio": {}}], {}, "only text and image_url"),
    ],
)
@pytest.mark.parametrize("endpoint", ["completions", "conversation"])
async def test_a_bad_picture_is_refused_before_anything_goes_upstream(
    service: Client,
    content: list[dict[str, Any]],
    settings: dict[str, Any],
    words: str,
    endpoint: str,
) -> None:
    async with MockServer([sees_the_picture()]) as mock:
        client = service(mock, **settings)
        if endpoint == "completions":
            body = {"model": "seer", "messages": [{"role": "user", "content": content}]}
            response = await client.post("/v1/chat/completions", json=body)
        else:
            body = {"persona": "seer", "content": content}
            response = await client.post("/v1/conversations/c1/messages", json=body)
        report = mock.report()
    assert response.status_code == 400, response.text
    assert words in response.json()["error"]["message"]
    assert report["requests"] == 0


async def test_an_https_picture_is_passed_on_never_fetched(service: Client) -> None:
    # The address is on no network: a fetch by the service would fail the turn.
    url = "https://pictures.invalid/sign.png"
    messages = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": question_with(url)},
    ]
    fixture = strict("linked", exchange("glm-4.6v", messages, SEEN))
    async with MockServer([fixture]) as mock:
        client = service(mock)
        body = {"model": "seer", "messages": [{"role": "user", "content": question_with(url)}]}
        response = await client.post("/v1/chat/completions", json=body)
        report = mock.report()
    assert response.status_code == 200, response.text
    assert report["requests"] == 1
    assert report["fixtures"][0]["served"] == [1]


def description_call(text: str = QUESTION, vision: str = "glm-4.6v") -> dict[str, Any]:
    context = f"The user's message with this picture: {text}"
    messages = [
        {"role": "system", "content": DESCRIBE_PROMPT},
        {"role": "user", "content": question_with(text=context)},
    ]
    return exchange(vision, messages, DESCRIPTION)


def answer_call(earlier: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": PROMPT},
        *(earlier or []),
        {"role": "user", "content": f"{QUESTION}\n\n{described()}"},
    ]
    return exchange("glm-4.7", messages, ANSWERED)


@pytest.mark.parametrize("stream", [False, True])
async def test_a_text_only_persona_gets_the_picture_described_first(
    service: Client, stream: bool
) -> None:
    fixture = strict("fallback", description_call(), answer_call())
    async with MockServer([fixture]) as mock:
        client = service(mock)
        body = {"model": "reader", "messages": [{"role": "user", "content": question_with()}]}
        response = await client.post("/v1/chat/completions", json={**body, "stream": stream})
        report = mock.report()
    assert response.status_code == 200, response.text
    assert ANSWERED in response.text
    # One description call to LLM_VISION_MODEL with the picture, one answer call with the
    # description as marked text and no picture (the mock refuses a picture to glm-4.7).
    assert report["requests"] == 2
    assert report["unmatched_requests"] == []
    assert report["fixtures"][0]["served"] == [1, 1]


async def test_a_persona_names_its_own_vision_model(tmp_path: Path, service: Client) -> None:
    fixture = strict("own_vision", description_call(vision="glm-5v-turbo"), answer_call())
    async with MockServer([fixture]) as mock:
        (tmp_path / "personas").mkdir()
        (tmp_path / "personas" / "reader.toml").write_text(
            f'system_prompt = "{PROMPT}"\nmodel = "glm-4.7"\nvision_model = "glm-5v-turbo"\n\n'
            '[web_search]\nmode = "off"\n',
            encoding="utf-8",
        )
        client = service(mock)
        body = {"model": "reader", "messages": [{"role": "user", "content": question_with()}]}
        response = await client.post("/v1/chat/completions", json=body)
        report = mock.report()
    assert response.status_code == 200, response.text
    assert report["fixtures"][0]["served"] == [1, 1]


async def test_a_later_turn_sends_the_description_not_the_picture(service: Client) -> None:
    follow_up = "And what colour is it?"
    earlier = [
        {"role": "user", "content": f"{QUESTION}\n\n{described()}"},
        {"role": "assistant", "content": ANSWERED},
    ]
    second = exchange(
        "glm-4.7",
        [{"role": "system", "content": PROMPT}, *earlier, {"role": "user", "content": follow_up}],
        "Green.",
    )
    fixture = strict("later_turn", description_call(), answer_call(), second)
    async with MockServer([fixture]) as mock:
        client = service(mock)
        first = await client.post(
            "/v1/conversations/c1/messages", json={"persona": "reader", "content": question_with()}
        )
        again = await client.post(
            "/v1/conversations/c1/messages", json={"persona": "reader", "content": follow_up}
        )
        stored = await client.get("/v1/conversations/c1")
        picture = await client.get(f"/v1/conversations/c1/pictures/{DIGEST}")
        elsewhere = await client.get(f"/v1/conversations/c2/pictures/{DIGEST}")
        await client.delete("/v1/conversations/c1")
        gone = await client.get(f"/v1/conversations/c1/pictures/{DIGEST}")
        report = mock.report()
    assert first.status_code == again.status_code == 200, (first.text, again.text)
    assert report["requests"] == 3
    assert report["fixtures"][0]["served"] == [1, 1, 1]
    # The messages keep the description, never the picture; the picture is kept beside them,
    # by its hash, with its description, and goes with the conversation.
    assert "base64" not in stored.text
    assert DESCRIPTION in stored.json()["messages"][0]["content"]
    assert stored.json()["pictures"] == [
        {"turn": 1, "sha256": DIGEST, "mime": "image/png", "description": DESCRIPTION}
    ]
    assert picture.status_code == 200 and picture.content == PNG
    assert picture.headers["content-type"] == "image/png"
    assert elsewhere.status_code == gone.status_code == 404


async def test_a_vision_persona_s_later_turn_does_not_resend_the_picture(
    service: Client,
) -> None:
    follow_up = "Thanks. Anything else?"
    mark = f"[Picture 1 (png, sha256 {DIGEST[:12]}) was shown in this turn; it is not sent again]"
    earlier = [
        {"role": "user", "content": f"{QUESTION}\n\n{mark}"},
        {"role": "assistant", "content": SEEN},
    ]
    first = exchange(
        "glm-4.6v",
        [{"role": "system", "content": PROMPT}, {"role": "user", "content": question_with()}],
        SEEN,
    )
    second = exchange(
        "glm-4.6v",
        [{"role": "system", "content": PROMPT}, *earlier, {"role": "user", "content": follow_up}],
        "No.",
    )
    async with MockServer([strict("vision_later", first, second)]) as mock:
        client = service(mock)
        for content in (question_with(), follow_up):
            response = await client.post(
                "/v1/conversations/c1/messages", json={"persona": "seer", "content": content}
            )
            assert response.status_code == 200, response.text
        report = mock.report()
    assert report["fixtures"][0]["served"] == [1, 1]


async def test_an_openai_history_s_earlier_picture_is_not_sent_again(service: Client) -> None:
    messages = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "[a picture sent earlier; it is not sent again]"},
        {"role": "assistant", "content": SEEN},
        {"role": "user", "content": "Thanks."},
    ]
    async with MockServer([strict("history", exchange("glm-4.6v", messages, "Welcome."))]) as mock:
        client = service(mock)
        history = [
            {"role": "user", "content": question_with(text="")[1:]},
            {"role": "assistant", "content": SEEN},
            {"role": "user", "content": "Thanks."},
        ]
        response = await client.post(
            "/v1/chat/completions", json={"model": "seer", "messages": history}
        )
        report = mock.report()
    assert response.status_code == 200, response.text
    assert report["fixtures"][0]["served"] == [1]


async def test_a_fixture_records_a_picture_by_its_hash(service: Client) -> None:
    by_hash = question_with(f"sha256:{DIGEST}")
    messages = [{"role": "system", "content": PROMPT}, {"role": "user", "content": by_hash}]
    other = question_with("data:image/png;base64," + base64.b64encode(PNG + b"!").decode())
    async with MockServer([strict("by_hash", exchange("glm-4.6v", messages, SEEN))]) as mock:
        client = service(mock)
        body = {"model": "seer", "messages": [{"role": "user", "content": question_with()}]}
        matched = await client.post("/v1/chat/completions", json=body)
        body = {"model": "seer", "messages": [{"role": "user", "content": other}]}
        unmatched = await client.post("/v1/chat/completions", json=body)
    assert matched.status_code == 200 and SEEN in matched.text
    # Another picture (other bytes, so another hash) is not the recorded one.
    assert unmatched.status_code != 200


async def test_a_web_question_with_a_picture_searches_and_sees(
    tmp_path: Path, service: Client
) -> None:
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "seer.toml").write_text(
        f'system_prompt = "{PROMPT}"\nmodel = "glm-4.6v"\n\n[web_search]\nmode = "builtin"\n',
        encoding="utf-8",
    )
    question = "where can I buy this?"
    recorded = exchange(
        "glm-4.6v",
        [{"role": "user", "content": question_with(f"sha256:{DIGEST}", text=question)}],
        "At the corner shop [ref_1].",
    )
    recorded["request"]["body"]["tools"] = [{"type": "web_search", "web_search": {}}]
    fixture = Fixture.model_validate(
        {"name": "search_and_sight", "user_input": question, "exchanges": [recorded]}
    )
    async with MockServer([fixture]) as mock:
        client = service(mock)
        asked = question_with(text=f"// {question}")
        body = {"model": "seer", "messages": [{"role": "user", "content": asked}]}
        response = await client.post("/v1/chat/completions", json=body)
        report = mock.report()
    assert response.status_code == 200, response.text
    assert "corner shop" in response.text
    # Served only to a request offering the built-in search with the picture beside the
    # question (the `//` taken off it).
    assert report["fixtures"][0]["served"] == [1]
