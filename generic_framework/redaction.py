"""Secrets out of every text the library shows: messages, log lines, error bodies, fixtures.

:func:`redact` removes registered secrets (the API key, the service token, a database password:
the CLI and the service register them as soon as settings are read) and anything shaped like a
credential; :func:`redact_url` shows a configured address without its user information, query
or fragment. The error tree (:mod:`generic_framework.errors`) runs every message through
:func:`redact`, so no ``str()`` or ``repr()`` of an error holds a key.
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["redact", "redact_url", "register_secret"]

# Z.AI keys look like "<32 hex>.<16 alnum>"; Bearer tokens and key=value pairs are caught too.
# In URLs: the password of "scheme://user:password@host", and the value of every query
# parameter whose name looks like a credential (?key=, &api_key=, ?access_token=, ?sig=...),
# in a query string or a fragment (#key=...). OpenAI-style keys (sk-...) anywhere. A Telegram
# Bot API URL carries the bot's token in its path ("/bot<id>:<secret>/getMe"), and httpx logs
# every request's URL.
_SECRET_PATTERNS = (
    re.compile(r"(/bot)[0-9]{1,20}:[A-Za-z0-9_-]+"),
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
    bearer tokens, ``api_key=...``-style pairs, Telegram bot tokens in Bot API paths
    (``/bot***/getMe``), URL credentials (``https://user:***@host``,
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
