"""The error tree: every error the library raises subclasses :class:`GLMError`.

Split by whose fault it is::

    GLMError
    ├── ConfigError                      your configuration (a setting, a persona file, a tool)
    ├── APIError                         anything that came from (or failed on the way to) Z.AI
    │   ├── APIStatusError               Z.AI answered with an error status or business code
    │   │   ├── AuthenticationError      401/403, codes 1000-1004: check OPENAI_API_KEY
    │   │   ├── InsufficientBalanceError 1113 and account codes 1110-1121: top up the account
    │   │   ├── QuotaExceededError       1304, 1308-1311, 1313: a plan limit; wait for its reset
    │   │   ├── RateLimitError           1302, 1303, 1305, 1312 (and bare 429): retried
    │   │   │   └── UpstreamBusyError    no upstream slot within LLM_QUEUE_TIMEOUT: not retried
    │   │   ├── BadRequestError          400, 1210-1215, 1261: the request itself is wrong
    │   │   ├── ContentFilterError       1301 or finish_reason "sensitive"
    │   │   ├── NotFoundError            404, 1211/1221/1222
    │   │   └── ServerError              5xx, 500, finish_reason "network_error": retried
    │   ├── APIConnectionError           could not reach Z.AI, or the connection broke: retried
    │   │   └── APITimeoutError          connect/read/pool timeout (LLM_TIMEOUT ...): retried
    │   └── ResponseValidationError      Z.AI (or a proxy) answered with a body we cannot parse
    ├── StoreUnavailableError            the conversation database (DATABASE_URL) cannot be
    │                                    reached or dropped the connection: retried, then 503
    └── ToolLoopError                    a bug inside the tool loop, never the model's fault

Every instance carries ``status_code``, ``code`` (the Z.AI business code as a string),
``message``, ``request_id`` and ``retryable``. No ``str()`` or ``repr()`` ever holds the API key:
messages built from upstream bodies go through :func:`redact` first.

The single mapping from (HTTP status, business code) to a class is :func:`error_for`.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigError",
    "ContentFilterError",
    "GLMError",
    "InsufficientBalanceError",
    "NotFoundError",
    "QuotaExceededError",
    "RateLimitError",
    "ResponseValidationError",
    "ServerError",
    "StoreUnavailableError",
    "ToolLoopError",
    "UpstreamBusyError",
    "error_for",
    "redact",
    "redact_url",
]

# Z.AI keys look like "<32 hex>.<16 alnum>"; Bearer tokens and key=value pairs are caught too.
# In URLs: the password of "scheme://user:password@host", and the value of every query
# parameter whose name looks like a credential (?key=, &api_key=, ?access_token=, ?sig=...),
# in a query string or a fragment (#key=...). OpenAI-style keys (sk-...) anywhere.
_SECRET_PATTERNS = (
    re.compile(r"[0-9a-fA-F]{32}\.[A-Za-z0-9]{16}"),
    re.compile(r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{6,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(
        r"(?i)((?:api[_-]?key|authorization|token|secret)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}&]{4,}"
    ),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/?#@\s:\"']*:)[^/?#@\s\"']+(?=@)"),
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/?#@\s:\"']+(?=@)"),
    re.compile(
        r"(?i)([?&;#][^=&#\s\"']*(?:key|token|secret|pass|pwd|sig|auth|credential|session)"
        r"[^=&#\s\"']*=)[^&#\s\"'<>]*[^&#\s\"'<>:;,.)]"
    ),
)
_KNOWN_SECRETS: set[str] = set()


def register_secret(value: str | None) -> None:
    """Remember a secret value so :func:`redact` removes it from any text, whatever its shape."""
    if value and len(value) >= 4:
        _KNOWN_SECRETS.add(value)


def redact(text: str, limit: int | None = None) -> str:
    """Return ``text`` with secrets replaced by ``***``, optionally truncated.

    Removed: every value given to :func:`register_secret`, Z.AI-shaped keys, ``sk-`` keys,
    bearer tokens, ``api_key=...``-style pairs, URL credentials (``https://user:***@host``,
    ``https://***@host``) and the values of URL query or fragment parameters named like
    credentials (``?key=***``, ``&access_token=***``, ``#key=***``). A configured address is
    shown through :func:`redact_url` instead, which hides its whole query and fragment.
    """
    for secret in _KNOWN_SECRETS:
        if secret in text:
            text = text.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
    if limit is not None and len(text) > limit:
        text = text[:limit] + f"... [{len(text) - limit} more characters]"
    return text


def redact_url(url: str) -> str:
    """``url`` fit to show: its user information, query string and fragment hidden.

    ``https://user:pw@host/p?q#f`` gives ``https://user:***@host/p?***#***`` (a lone user name,
    which may be a token, gives ``***@``); then :func:`redact` removes any registered secret
    from what is left (a key put in the path). For configured addresses (``OPENAI_BASE_URL``,
    ``WEB_SEARCH_MCP_URL``, ``DATABASE_URL``): whatever their query or fragment holds, none of
    it is ever needed in a message.
    """
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    userinfo, at, host = netloc.rpartition("@")
    if at:
        name, colon, _ = userinfo.partition(":")
        netloc = f"{name}:***@{host}" if colon and name else f"***@{host}"
    shown = parts._replace(
        netloc=netloc,
        query="***" if parts.query else "",
        fragment="***" if parts.fragment else "",
    )
    return redact(urllib.parse.urlunsplit(shown))


class GLMError(Exception):
    """Base of every error raised by generic_framework.

    Attributes:
        message: a human-readable explanation, already redacted.
        status_code: the HTTP status of the upstream response, if there was one.
        code: the Z.AI business code as a string (``"1302"``), if there was one.
        request_id: Z.AI's request id, if known.
        retryable: whether the retry policy may try the same request again.
        retry_after: seconds the server asked us to wait, if it said so.
    """

    retryable_default = False

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = redact(message)
        self.status_code = status_code
        self.code = code
        self.request_id = request_id
        self.retryable = self.retryable_default if retryable is None else retryable
        self.retry_after = retry_after
        super().__init__(self.message)

    def __str__(self) -> str:
        parts = []
        if self.status_code is not None:
            parts.append(f"HTTP {self.status_code}")
        if self.code is not None:
            parts.append(f"code {self.code}")
        prefix = f"[{', '.join(parts)}] " if parts else ""
        return prefix + self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, status_code={self.status_code!r}, "
            f"code={self.code!r}, request_id={self.request_id!r}, retryable={self.retryable!r})"
        )


class ConfigError(GLMError, ValueError):
    """A setting, persona file or tool definition is invalid; the message names which."""


class ToolLoopError(GLMError):
    """The tool loop reached a state it must never reach (a bug, not the model's mistake)."""


class APIError(GLMError):
    """Something went wrong talking to Z.AI."""


class APIStatusError(APIError):
    """Z.AI answered with an error status or an error business code."""


class AuthenticationError(APIStatusError):
    """The API key is missing, invalid or expired (401/403, codes 1000-1004)."""


class InsufficientBalanceError(APIStatusError):
    """The account has no balance or is unusable (1113, 1110-1121). Retrying does not help."""


class QuotaExceededError(APIStatusError):
    """A daily, 5-hour, weekly or plan limit was reached (1304, 1308-1311, 1313)."""


class RateLimitError(APIStatusError):
    """Too many concurrent or frequent requests, or an overloaded model (1302/1303/1305/1312)."""

    retryable_default = True


class UpstreamBusyError(RateLimitError):
    """Every upstream slot (``LLM_MAX_CONCURRENCY``, across replicas with PostgreSQL) stayed
    taken, or a 1302 pause lasted, past ``LLM_QUEUE_TIMEOUT`` seconds.

    Raised before anything was sent, so nothing reached Z.AI. Not retried: the wait for a slot
    already was the retry. ``retry_after`` says when asking again makes sense.
    """

    retryable_default = False


class BadRequestError(APIStatusError):
    """The request was rejected as malformed (400, 1210-1215, 1261)."""


class ContentFilterError(APIStatusError):
    """Content moderation blocked the input or the output (1301, finish_reason ``sensitive``)."""


class NotFoundError(APIStatusError):
    """The model, API or resource does not exist (404, 1211, 1221, 1222)."""


class ServerError(APIStatusError):
    """Z.AI failed on its side (5xx, code 500, finish_reason ``network_error``)."""

    retryable_default = True


class APIConnectionError(APIError):
    """Z.AI could not be reached, or the connection broke before the answer was complete."""

    retryable_default = True


class APITimeoutError(APIConnectionError):
    """A connect, read or pool timeout expired (see LLM_TIMEOUT and friends)."""


class StoreUnavailableError(GLMError):
    """The conversation database could not be reached, or lost the connection mid-operation.

    The message names the database without its password. Retryable: a restarted server is
    usually back within seconds; ``retry_after`` says when to ask again.
    """

    retryable_default = True


class ResponseValidationError(APIError):
    """The response body was not the JSON we expected.

    ``body`` holds a truncated, redacted copy of what arrived, for debugging.
    """

    def __init__(self, message: str, *, body: str = "", **kwargs: Any) -> None:
        self.body = redact(body, limit=2000)
        super().__init__(message, **kwargs)


_RETRYABLE_CODES = frozenset({"1302", "1303", "1305", "1312", "500", "1234"})
_AUTH_CODES = frozenset({"1000", "1001", "1002", "1003", "1004"})
_QUOTA_CODES = frozenset({"1304", "1308", "1309", "1310", "1311", "1313"})
_NOT_FOUND_CODES = frozenset({"1211", "1221", "1222"})


def _class_for_code(code: str) -> type[APIStatusError] | None:
    if code in _AUTH_CODES:
        return AuthenticationError
    if code in _QUOTA_CODES:
        return QuotaExceededError
    if code in _NOT_FOUND_CODES:
        return NotFoundError
    if code in {"1302", "1303", "1305", "1312"}:
        return RateLimitError
    if code == "1301":
        return ContentFilterError
    if code in {"500", "1234", "1230"}:
        return ServerError
    if code.isdigit() and 1100 <= int(code) <= 1121:
        return InsufficientBalanceError
    if code.isdigit() and 1200 <= int(code) <= 1299:
        return BadRequestError
    return None


def _class_for_status(status: int) -> type[APIStatusError]:
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return BadRequestError


def error_for(
    status: int | None,
    code: str | None,
    message: str,
    *,
    request_id: str | None = None,
    retry_after: float | None = None,
) -> APIStatusError:
    """Map an upstream failure to its error class: the business code decides, then the status.

    Z.AI sends 1113 (no balance) and 1302 (concurrency) both as HTTP 429, so the status alone
    cannot tell whether a retry helps (docs/protocol.md §7). Retryable: 1302, 1303, 1305, 1312, 500,
    1234, and, when the code is absent or unknown, HTTP 408/409 and 5xx; a 429 with no business
    code at all is treated as a retryable rate limit.
    """
    cls = _class_for_code(code) if code else None
    if cls is not None:
        retryable = code in _RETRYABLE_CODES
    else:
        # No code, or one this table does not know: the status decides. A 429 is retried only
        # when it names no code at all (a proxy's limit); an unknown code at 429 may be a quota.
        cls = _class_for_status(status or 400)
        retryable = status is not None and (
            status in (408, 409) or status >= 500 or (status == 429 and not code)
        )
    return cls(
        message,
        status_code=status,
        code=code,
        request_id=request_id,
        retryable=retryable,
        retry_after=retry_after,
    )
