"""Matching on ``thinking`` and ``model``, and the refusals the model table prescribes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mock_helpers import chat, completion, exchange, make_fixture, system, user

from generic_framework.mock import Fixture, MockServer
from generic_framework.mock.app import create_app
from generic_framework.mock.fixture import FixtureError

CHAT = "/api/paas/v4/chat/completions"
QUESTION = "Is it raining in Nanaimo?"


def recording(name: str, answer: str, match: dict[str, str], **body: Any) -> Fixture:
    return make_fixture(
        name,
        exchange(chat(system(), user(QUESTION), **body), completion(answer, ident=name)),
        match=match,
    )


def ask(http: httpx.Client, **body: Any) -> httpx.Response:
    return http.post(CHAT, json=chat(system(), user(QUESTION), **body))


def content(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def test_recordings_differing_only_in_thinking_are_each_served(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    exact = {"thinking": "exact"}
    serve(
        recording("thinks", "Yes, light rain.", exact, thinking={"type": "enabled"}),
        recording("quick", "Yes.", exact, thinking={"type": "disabled"}),
        recording("default", "Probably.", exact),
    )
    for _ in range(2):
        assert content(ask(http, thinking={"type": "disabled"})) == "Yes."
        assert content(ask(http, thinking={"type": "enabled"})) == "Yes, light rain."
        assert content(ask(http)) == "Probably."
    other = ask(http, thinking={"type": "enabled", "clear_thinking": False})
    assert other.status_code == 400
    assert other.json()["error"]["difference"].startswith("thinking: expected")


def test_recordings_of_several_models_are_each_served(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    exact = {"model": "exact"}
    serve(
        recording("old", "From 4.7.", exact, model="glm-4.7"),
        recording("new", "From 5.1.", exact, model="glm-5.1"),
    )
    assert content(ask(http, model="glm-5.1")) == "From 5.1."
    assert content(ask(http, model="GLM-4.7")) == "From 4.7."
    assert content(ask(http, model="glm-5.1")) == "From 5.1."
    missing = ask(http, model="glm-5.2")
    assert missing.json()["error"]["difference"] == "model: expected glm-4.7, got glm-5.2"


def test_by_default_thinking_and_model_are_ignored(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(recording("any", "Maybe.", {}, thinking={"type": "enabled"}))
    assert content(ask(http, model="glm-5.1", thinking={"type": "disabled"})) == "Maybe."


def test_thinking_disabled_on_glm_5_3_is_refused_as_the_service_does(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(recording("any", "Maybe.", {}))
    refused = ask(http, model="glm-5.3", thinking={"type": "disabled"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "1210"
    assert error["message"].startswith("This model always engages in thinking")
    assert content(ask(http, model="glm-5.3", thinking={"type": "enabled"})) == "Maybe."
    assert content(ask(http, model="glm-5.2", thinking={"type": "disabled"})) == "Maybe."


def test_an_unknown_model_is_refused_unless_a_fixture_records_it(
    serve: Callable[..., MockServer], http: httpx.Client
) -> None:
    serve(recording("preview", "Hi.", {}, model="glm-9-preview"))
    unknown = ask(http, model="glm-404")
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == "1211"
    assert content(ask(http, model="glm-9-preview")) == "Hi."
    assert content(ask(http, model="glm-4.6v")) == "Hi."  # in the model table


def test_a_fixture_recording_what_the_service_refuses_is_not_loaded() -> None:
    bad = recording("bad", "Yes.", {}, model="glm-5.3", thinking={"type": "disabled"})
    with pytest.raises(FixtureError, match="1210 This model always engages in thinking"):
        create_app([bad])


PICTURE = {"type": "image_url", "image_url": {"url": "https://pictures.invalid/a.png"}}


@pytest.mark.parametrize(
    ("model", "status"),
    [("glm-4.7", 400), ("glm-5.3", 400), ("glm-4.6v", 200), ("glm-5v-turbo", 200)],
)
def test_a_picture_is_refused_to_a_model_that_cannot_see(
    serve: Callable[..., MockServer], http: httpx.Client, model: str, status: int
) -> None:
    asked = {"role": "user", "content": [{"type": "text", "text": QUESTION}, PICTURE]}
    recorded = exchange(chat(asked, model="glm-4.6v"), completion("Seen."))
    serve(make_fixture("any", recorded, user_input=QUESTION))
    response = http.post(CHAT, json=chat(asked, model=model))
    assert response.status_code == status, response.text
    if status == 400:
        assert response.json()["error"]["code"] == "1210"
        assert "does not take image content" in response.json()["error"]["message"]
