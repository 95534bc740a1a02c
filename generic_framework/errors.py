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
    │   │   ├── BadRequestError          400, 1210-1215: the request itself is wrong
    │   │   │   └── ContextTooLongError  1261: too long for the context window, even trimmed
    │   │   ├── ContentFilterError       1301 or finish_reason "sensitive"
    │   │   ├── NotFoundError            404, 1211/1221/1222
    │   │   └── ServerError              5xx, 500, finish_reason "network_error": retried
    │   ├── APIConnectionError           could not reach Z.AI, or the connection broke: retried
    │   │   └── APITimeoutError          connect/read/pool timeout (LLM_TIMEOUT ...): retried
    │   └── ResponseValidationError      Z.AI (or a proxy) answered with a body we cannot parse
    ├── StoreUnavailableError            the conversation database (DATABASE_URL) cannot be
    │                                    reached or dropped the connection: retried, then 503
    ├── ToolLoopError                    a bug inside the tool loop, never the model's fault
    └── OutputSchemaError                the model's answer did not match the JSON schema asked
                                         for, even after one corrective call

Every instance carries ``status_code``, ``code`` (the Z.AI business code as a string),
``message``, ``request_id`` and ``retryable``. No ``str()`` or ``repr()`` ever holds the API key:
messages built from upstream bodies go through
:func:`~generic_framework.redaction.redact` first.

This module holds the base and the errors that are not the upstream's (configuration, the
conversation database, the tool loop); :mod:`generic_framework.wire.errors` holds
:class:`APIError` and below, and the single mapping from (HTTP status, business code) to a
class, :func:`~generic_framework.wire.errors.error_for`.
"""

from __future__ import annotations

from generic_framework.redaction import redact

__all__ = [
    "ConfigError",
    "GLMError",
    "OutputSchemaError",
    "StoreUnavailableError",
    "ToolLoopError",
]


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


class StoreUnavailableError(GLMError):
    """The conversation database could not be reached, or lost the connection mid-operation.

    The message names the database without its password. Retryable: a restarted server is
    usually back within seconds; ``retry_after`` says when to ask again.
    """

    retryable_default = True


class OutputSchemaError(GLMError):
    """The model's final answer was not JSON that validates against the schema the caller asked
    for (``response_format`` ``json_schema``), twice: once, then after one corrective call. The
    message says what did not match."""
