"""Log output: plain text lines, or one JSON object per line (``LOG_FORMAT=json``).

:class:`JsonFormatter` writes ``time``, ``level``, ``logger`` and ``message``, then every field
a log call passed in ``extra`` (the turn's line carries ``turn_id``, ``persona``, the hashed
``conversation``, ``request_id``, ``outcome``, token counts...). Messages, string fields and
tracebacks go through :func:`~generic_framework.redaction.redact` once more, so a key that
slipped into a message is still not written.

:func:`configure_logging` is for the entry points (``generic-framework serve``): the library
itself never installs a handler.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from generic_framework.redaction import redact

__all__ = [
    "TEXT_FORMAT",
    "AccessFields",
    "JsonFormatter",
    "RedactingFilter",
    "RedactingFormatter",
    "configure_logging",
    "conversation_hash",
    "redact_uvicorn_logs",
]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The line format of ``LOG_FORMAT=text``."""

# The attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",  # uvicorn's coloured copy of the message
}


def conversation_hash(conversation_id: str | None) -> str | None:
    """A short stable pseudonym of a conversation id, for logs and traces.

    The same id always gives the same 16 hex digits, so one conversation's lines can be found
    together, but the id itself (often a user or chat id) is never written. It is a pseudonym,
    not a secret: a guessable id can be confirmed by hashing the guess.
    """
    if conversation_id is None:
        return None
    return hashlib.blake2b(conversation_id.encode(), digest_size=8).hexdigest()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module's docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON line."""
        when = datetime.fromtimestamp(record.created, UTC)
        data: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                data[key] = redact(value) if isinstance(value, str) else value
        if record.exc_info:
            data["exception"] = redact(self.formatException(record.exc_info))
        if record.stack_info:
            data["stack"] = redact(self.formatStack(record.stack_info))
        return json.dumps(data, ensure_ascii=False, default=str)


class RedactingFormatter(logging.Formatter):
    """The text lines of ``LOG_FORMAT=text``, redacted as the JSON lines are."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a text line without secrets."""
        return redact(super().format(record))


class RedactingFilter(logging.Filter):
    """Redacts a record's message and arguments before any handler formats it: uvicorn's access
    log repeats every request path, which a client may have put a key in
    (``/v1/conversations/<key>``, ``?api_key=...``), and its handlers are uvicorn's own."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; never drops it."""
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


class AccessFields(logging.Filter):
    """Gives uvicorn's access lines their parts as fields: ``client`` (the client's address:
    the one a trusted proxy named, service/forwarded.py), ``method``, ``path`` and ``status``,
    so a JSON line can be filtered by client without parsing its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the fields to an access record (``client_addr, method, path, version,
        status``); never drops it."""
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            address = str(args[0])
            host, colon, port = address.rpartition(":")
            record.client = host if colon and port.isdigit() else address
            record.method, record.path, record.status = args[1], args[2], args[4]
        return True


def redact_uvicorn_logs() -> None:
    """Put a :class:`RedactingFilter` on uvicorn's loggers, and :class:`AccessFields` on its
    access log (once; after ``uvicorn.Config``, which configures them)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        log = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in log.filters):
            log.addFilter(RedactingFilter())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessFields) for f in access.filters):
        access.addFilter(AccessFields())


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    """Send every log record at ``level`` or above to stderr, as text lines or JSON lines.

    A process whose root logger already has handlers (configured by the application that
    embeds the service) is left alone.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else RedactingFormatter(TEXT_FORMAT)
    )
    root.addHandler(handler)
    root.setLevel(level)
