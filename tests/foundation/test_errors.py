"""The error tree: the business-code table, status fallbacks, redaction and safe printing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from generic_framework import errors as tree
from generic_framework import redaction
from generic_framework.errors import ConfigError, GLMError
from generic_framework.redaction import redact
from generic_framework.wire import errors
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import (
    APIConnectionError,
    APIError,
    APIStatusError,
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
    error_for,
)
from generic_framework.wire.messages import ChatRequest, UserMessage
from generic_framework.wire.retry import is_retryable

# Z.AI's documented business codes with the HTTP status they come with, the class each must map
# to, and whether a retry can help. Retried: the concurrency, frequency and overload codes and
# internal errors. Never retried: authentication, balance, bad requests, content policy, and the
# plan limits that only reset after hours or days.
CATALOGUE: list[tuple[int, str, type[APIStatusError], bool]] = [
    (401, "1000", AuthenticationError, False),
    (401, "1001", AuthenticationError, False),
    (401, "1002", AuthenticationError, False),
    (401, "1003", AuthenticationError, False),
    (429, "1113", InsufficientBalanceError, False),
    (400, "1211", NotFoundError, False),
    (400, "1213", BadRequestError, False),
    (400, "1214", BadRequestError, False),
    (400, "1261", ContextTooLongError, False),
    (400, "1301", ContentFilterError, False),
    (429, "1302", RateLimitError, True),
    (429, "1303", RateLimitError, True),
    (429, "1304", QuotaExceededError, False),
    (429, "1305", RateLimitError, True),
    (503, "1305", RateLimitError, True),
    (429, "1308", QuotaExceededError, False),
    (429, "1309", QuotaExceededError, False),
    (429, "1310", QuotaExceededError, False),
    (400, "1311", QuotaExceededError, False),
    (429, "1312", RateLimitError, True),
    (500, "500", ServerError, True),
]


def _ids(row: tuple[int, str, type[APIStatusError], bool]) -> str:
    return f"{row[0]}-{row[1]}"


@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
def test_catalogue_row_maps_to_class_and_retry_decision(
    row: tuple[int, str, type[APIStatusError], bool],
) -> None:
    status, code, cls, retryable = row

    error = error_for(status, code, "upstream text", request_id="req-1")

    assert type(error) is cls
    assert error.retryable is retryable
    assert is_retryable(error) is retryable
    assert (error.status_code, error.code, error.request_id) == (status, code, "req-1")
    assert error.message == "upstream text"


@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
async def test_catalogue_row_through_the_client(
    make_client: Callable[..., tuple[GLMClient, Any]],
    row: tuple[int, str, type[APIStatusError], bool],
) -> None:
    status, code, cls, retryable = row
    body = {"error": {"code": code, "message": f"message for {code}"}}
    responses = [httpx.Response(status, json=body) for _ in range(3)]
    client, script = make_client(*responses, llm_max_retries=2)

    with pytest.raises(cls) as caught:
        await client.chat(ChatRequest(model="glm-4.7", messages=[UserMessage(content="hi")]))

    assert len(script.requests) == (3 if retryable else 1)
    assert caught.value.code == code
    assert caught.value.status_code == status
    assert caught.value.message == f"message for {code}"


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (400, BadRequestError, False),
        (401, AuthenticationError, False),
        (403, AuthenticationError, False),
        (404, NotFoundError, False),
        (408, BadRequestError, True),
        (409, BadRequestError, True),
        (422, BadRequestError, False),
        (429, RateLimitError, True),
        (500, ServerError, True),
        (502, ServerError, True),
        (503, ServerError, True),
        (504, ServerError, True),
    ],
)
def test_status_without_business_code(
    status: int, cls: type[APIStatusError], retryable: bool
) -> None:
    error = error_for(status, None, "no code")

    assert type(error) is cls
    assert error.retryable is retryable
    assert error.code is None


@pytest.mark.parametrize(
    ("status", "cls", "retryable"),
    [
        (503, ServerError, True),
        (502, ServerError, True),
        (408, BadRequestError, True),
        (429, RateLimitError, False),  # an unknown code at 429 may well be a quota
        (400, BadRequestError, False),
        (401, AuthenticationError, False),
    ],
)
def test_unknown_business_code_falls_back_to_the_status(
    status: int, cls: type[APIStatusError], retryable: bool
) -> None:
    error = error_for(status, "7777", "new code")

    assert type(error) is cls
    assert error.retryable is retryable
    assert error.code == "7777"


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("1004", AuthenticationError),
        ("1110", InsufficientBalanceError),
        ("1121", InsufficientBalanceError),
        ("1210", BadRequestError),
        ("1215", BadRequestError),
        ("1221", NotFoundError),
        ("1222", NotFoundError),
        ("1313", QuotaExceededError),
    ],
)
def test_code_ranges_are_never_retried(code: str, cls: type[APIStatusError]) -> None:
    error = error_for(429, code, "x")

    assert type(error) is cls
    assert error.retryable is False


def test_network_error_code_is_retried() -> None:
    error = error_for(500, "1234", "network error")

    assert isinstance(error, ServerError)
    assert error.retryable is True


def test_the_tree_matches_the_documented_shape() -> None:
    for module in (tree, errors):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                assert issubclass(value, GLMError), name
    # Only the upstream's errors live in wire/: the rest is not a wire error.
    assert all(issubclass(getattr(errors, n), APIError) for n in errors.__all__ if n[0].isupper())
    assert not any(issubclass(getattr(tree, n), APIError) for n in tree.__all__)
    for cls in (AuthenticationError, InsufficientBalanceError, RateLimitError, BadRequestError):
        assert issubclass(cls, APIStatusError)
    for cls in (ContentFilterError, ServerError, NotFoundError, QuotaExceededError):
        assert issubclass(cls, APIStatusError)
    assert issubclass(APITimeoutError, APIConnectionError)
    assert issubclass(APIConnectionError, APIError)
    assert issubclass(ResponseValidationError, APIError)
    assert issubclass(ConfigError, ValueError)
    assert APIConnectionError("x").retryable is True
    assert APITimeoutError("x").retryable is True
    assert ResponseValidationError("x").retryable is False


def test_every_error_carries_the_contract_attributes() -> None:
    error = RateLimitError("slow down", status_code=429, code="1302", request_id="r9")

    assert (error.status_code, error.code, error.message, error.request_id) == (
        429,
        "1302",
        "slow down",
        "r9",
    )
    assert error.retryable is True
    assert str(error) == "[HTTP 429, code 1302] slow down"
    assert "RateLimitError" in repr(error)
    assert str(GLMError("plain")) == "plain"


# ---------------------------------------------------------------- redaction


def test_redact_removes_a_key_in_zai_shape(fake_key: str) -> None:
    text = redact(f"invalid key {fake_key} supplied")

    assert fake_key not in text
    assert "c0ffee00" not in text
    assert text == "invalid key *** supplied"


@pytest.mark.parametrize(
    "template",
    [
        "Authorization: Bearer {k}",
        'headers {{"authorization": "{k}"}}',
        "api_key={k}&x=1",
        "api-key: {k}",
        "token={k}",
    ],
)
def test_redact_removes_bearer_tokens_and_key_values(template: str) -> None:
    secret = "sk-live-abcdefghijklmnop"

    assert secret not in redact(template.format(k=secret))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "could not reach http://h:9/v4?key=AIzaSyA-1234567890abcdef: check it",
            "could not reach http://h:9/v4?key=***: check it",
        ),
        ("https://user:hunter2-secret@api.z.ai/v4", "https://user:***@api.z.ai/v4"),
        ("(got 'ftp://c0ffee00c0ffee00c0ffee00@zai.invalid/')", "(got 'ftp://***@zai.invalid/')"),
        (
            "GET /p?q=1&access_token=abc123&sig=ZZZ9 HTTP",
            "GET /p?q=1&access_token=***&sig=*** HTTP",
        ),
        ("https://h/p?x-goog-credential=a%2Fb&page=2", "https://h/p?x-goog-credential=***&page=2"),
        ("https://api.z.ai/api/paas/v4/chat/completions?stream=1", None),
        ("mail me at someone@example.org", None),
        ("https://h/v4#key=0badc0de0badc0de", "https://h/v4#key=***"),
        ("https://h/v4?sk-0badc0de0badc0de", "https://h/v4?***"),
        ("https://h/v4#sk-0badc0de0badc0de", "https://h/v4#***"),
        ("a task-runner and a risk-assessment", None),
    ],
)
def test_redact_removes_credentials_from_urls(text: str, expected: str | None) -> None:
    assert redact(text) == (text if expected is None else expected)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.z.ai/api/paas/v4", "https://api.z.ai/api/paas/v4"),
        ("https://api.z.ai/api/paas/v4?plain0badc0de", "https://api.z.ai/api/paas/v4?***"),
        ("https://h/v4?a=1&b=plain0badc0de#frag0badc0de", "https://h/v4?***#***"),
        ("https://h/v4#key=plain0badc0de", "https://h/v4#***"),
        ("https://bot:pw0badc0de@h:5/v4", "https://bot:***@h:5/v4"),
        ("postgresql://tok0badc0de@db/bot?sslmode=require", "postgresql://***@db/bot?***"),
        ("https://:pw0badc0de@h/v4", "https://***@h/v4"),
    ],
)
def test_redact_url_hides_the_query_fragment_and_user_information(url: str, shown: str) -> None:
    assert redaction.redact_url(url) == shown


def test_redact_url_removes_a_registered_secret_from_the_path() -> None:
    redaction.register_secret("path-secret-0badc0de")
    try:
        assert redaction.redact_url("https://h/path-secret-0badc0de/v4") == "https://h/***/v4"
    finally:
        redaction._KNOWN_SECRETS.discard("path-secret-0badc0de")


def test_redact_removes_a_registered_secret_of_any_shape() -> None:
    redaction.register_secret("plain-words-as-a-secret")

    assert redact("the value plain-words-as-a-secret leaked") == "the value *** leaked"


def test_redact_truncates_after_redacting(fake_key: str) -> None:
    text = "x" * 290 + fake_key + "y" * 100

    result = redact(text, limit=300)

    assert fake_key[:8] not in result
    assert result.startswith("x" * 290 + "***")
    assert result.endswith("more characters]")


def test_error_text_and_repr_never_hold_the_key(fake_key: str) -> None:
    error = AuthenticationError(
        f"Authorization Token {fake_key} is invalid", status_code=401, code="1002"
    )
    invalid = ResponseValidationError("bad body", body=f'{{"echo": "{fake_key}"}}' * 200)

    for text in (str(error), repr(error), error.message, str(invalid), invalid.body):
        assert fake_key not in text
        assert "c0ffee00c0ffee00" not in text
    assert len(invalid.body) < 2100
