"""The value rules shared by every edge: each rule is written once, here.

A value enters the program at one of its edges: a CLI option or argument, an environment
variable (:class:`~generic_framework.config.Settings`), an HTTP body or path (the service), a
persona file (:class:`~generic_framework.core.spec.PersonaSpec`), or a library call. Each edge
checks it there, once, with the rule below, before anything is started or sent upstream; the
store enforces the conversation-id rule again on every write, so nothing can get past it
(docs/design/0313).

Each rule comes in two spellings: a ``check_*`` function that returns the (normalised) value or
raises :class:`ValueError` with a message that says what is allowed (CLI callbacks, the store,
the persona), and an ``Annotated`` type built from that function or from the same bounds
(pydantic models: settings, persona specs, request bodies). Messages never repeat the value:
each edge adds it in its own way (``(got ...)``), after redaction where it may hold a secret.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, WithJsonSchema
from pydantic_core import ErrorDetails, PydanticCustomError

__all__ = [
    "BODY_BYTES_DEFAULT",
    "BODY_BYTES_MAX",
    "BODY_BYTES_MIN",
    "CONVERSATION_ID_MAX",
    "CONVERSATION_ID_PATTERN",
    "MAX_ITEMS_LIMIT",
    "MAX_SECONDS",
    "MODEL_ID_PATTERN",
    "PERSONA_NAME_PATTERN",
    "PORT_MAX",
    "PORT_MIN",
    "BaseURL",
    "BindHost",
    "BodyBytes",
    "ConversationId",
    "HeaderName",
    "HostList",
    "IPNetwork",
    "ModelId",
    "PersonaName",
    "Port",
    "ReasoningEffort",
    "Recency",
    "SearchCount",
    "SearchPrompt",
    "Seconds",
    "Temperature",
    "ThinkingMode",
    "ToolRounds",
    "TrustedProxies",
    "check_base_url",
    "check_bind_host",
    "check_conversation_id",
    "check_header_name",
    "check_host_list",
    "check_model_id",
    "check_persona_name",
    "check_port",
    "check_text",
    "check_trusted_proxies",
    "shown",
    "trusted_proxies",
    "wording",
]

# ------------------------------------------------------------------------------ numbers

Temperature = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""Sampling temperature: 0.0-1.0 (Z.AI's range); ``nan`` is refused, not compared."""

ToolRounds = Annotated[int, Field(ge=0, le=50)]
"""Tool rounds per turn before the forced final answer; 0 turns tools off."""

SearchCount = Annotated[int, Field(ge=1, le=50)]
"""Results per web search (the Web Search API's range)."""

MAX_SECONDS = 86_400.0
"""The longest timeout or deadline accepted: one day. Longer is a typo, not a wish."""

Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)]
"""A timeout or deadline in seconds: finite, above 0, at most :data:`MAX_SECONDS`."""

PORT_MIN = 0
PORT_MAX = 65535
Port = Annotated[int, Field(ge=PORT_MIN, le=PORT_MAX)]
"""A TCP port to listen on; 0 picks a free one."""


def check_port(value: int) -> int:
    """Return ``value`` if it is a port to listen on (:data:`PORT_MIN`-:data:`PORT_MAX`).

    Raises:
        ValueError: it is not.
    """
    if not PORT_MIN <= value <= PORT_MAX:
        raise ValueError(f"must be between {PORT_MIN} and {PORT_MAX} (0 picks a free port)")
    return value


BODY_BYTES_MIN = 1024
BODY_BYTES_MAX = 64 * 1024 * 1024
BODY_BYTES_DEFAULT = 1024 * 1024
"""The service's request body limit (``BOT_MAX_BODY``) by default: 1 MiB, room for a long
stateless conversation; each message is limited separately (``BOT_MAX_MESSAGE_CHARS``)."""

BodyBytes = Annotated[int, Field(ge=BODY_BYTES_MIN, le=BODY_BYTES_MAX)]
"""A request body limit in bytes: 1 KiB-64 MiB (a body is read whole into memory)."""

ThinkingMode = Literal["enabled", "disabled"]
ReasoningEffort = Literal["max", "xhigh", "high", "medium", "low", "minimal", "none"]
"""Every ``reasoning_effort`` Z.AI documents (GLM-5.2 and later; each model takes a subset:
:mod:`generic_framework.wire.profiles`)."""
Recency = Literal["oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"]
SearchPrompt = Annotated[str, Field(min_length=1, max_length=4000, pattern=r"\S")]
"""The built-in web search tool's ``search_prompt``: 1-4000 characters, not only blanks."""

# ------------------------------------------------------------------------------ text


def check_text(value: str) -> str:
    """Return ``value`` if it is valid Unicode text (what UTF-8 can encode).

    Bytes that are not UTF-8 reach Python as lone surrogates (argv, a stdin read with
    ``surrogateescape``); they cannot be sent as JSON, stored or printed, so they are refused
    where they enter instead of failing deep inside a request.

    Raises:
        ValueError: ``value`` holds bytes that are not UTF-8.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "must be UTF-8 text: check the encoding of the terminal or of the input"
        ) from None
    return value


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, shortened to about ``limit`` characters for an error message."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters, " if isinstance(value, str) else ""
    return f"{size}starting {text[: limit - 10]}..."


MAX_ITEMS_LIMIT = 200
"""The largest ``max_items`` a persona may set (``[memory]``): the facts kept per user."""


# ------------------------------------------------------------------------------ identifiers

CONVERSATION_ID_MAX = 128
CONVERSATION_ID_PATTERN = rf"^[A-Za-z0-9_-]{{1,{CONVERSATION_ID_MAX}}}$"
"""Conversation ids: letters, digits, ``_`` and ``-``; no dots or slashes, so never a path."""
_CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN)


def check_conversation_id(value: str) -> str:
    """Return ``value`` if it is a valid conversation id (:data:`CONVERSATION_ID_PATTERN`).

    The store, the CLI's ``--conversation``, the service's paths and bodies and
    :meth:`Persona.respond <generic_framework.core.persona.Persona.respond>` all use this rule.

    Raises:
        ValueError: it is empty, too long, or has other characters.
    """
    if not isinstance(value, str) or not _CONVERSATION_ID.fullmatch(value):
        raise ValueError(
            f"a conversation id must be 1-{CONVERSATION_ID_MAX} letters, digits, '_' or '-'"
        )
    return value


PERSONA_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_PERSONA_NAME = re.compile(PERSONA_NAME_PATTERN)
PersonaName = Annotated[str, StringConstraints(pattern=PERSONA_NAME_PATTERN)]
"""1-64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit."""


def check_persona_name(value: str) -> str:
    """Return ``value`` if it is a valid persona name (:data:`PERSONA_NAME_PATTERN`).

    Raises:
        ValueError: it is not.
    """
    if not _PERSONA_NAME.fullmatch(value):
        raise ValueError(
            "a persona name must be 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return value


MODEL_ID_PATTERN = r"^[!-~]{1,128}$"
"""Model ids (``glm-4.7``, ``glm-4.5-air``, a gateway's ``z-ai/glm-4.6``): 1-128 printable
ASCII characters, no spaces."""
_MODEL_ID = re.compile(MODEL_ID_PATTERN)


def check_model_id(value: str) -> str:
    """Return ``value`` if it is a plausible model id (:data:`MODEL_ID_PATTERN`).

    An empty or garbled id would only come back from Z.AI as a 400, after a round trip.

    Raises:
        ValueError: it is not.
    """
    if not _MODEL_ID.fullmatch(value):
        raise ValueError("must be 1-128 printable ASCII characters with no spaces, e.g. glm-4.7")
    return value


# ------------------------------------------------------------------------------ addresses


def _url_parts(value: str) -> urllib.parse.SplitResult:
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError("must not contain spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(value)
        _ = parts.port  # raises for a port that is not a number in 0-65535
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise ValueError("has no host name, e.g. https://api.z.ai/api/paas/v4")
    return parts


def check_base_url(value: str) -> str:
    """Return the endpoint URL ``value`` without its trailing ``/``, if it can work.

    The API paths (``/chat/completions``) are appended to it, so it can hold no query string
    or fragment; and httpx would send a user name and password in it as Basic auth instead of
    the API key's Bearer header, so it can hold no credentials either.

    Raises:
        ValueError: it is not an http(s) URL with a host, or it has credentials, a query string
            or a fragment.
    """
    check_text(value)
    parts = _url_parts(value)
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            "must not hold a user name or password (they would be sent instead of the API "
            "key): put the key in OPENAI_API_KEY"
        )
    if parts.query or parts.fragment or value.rstrip("/").endswith(("?", "#")):
        raise ValueError(
            "must not have a query string or fragment (the API paths are appended to it): "
            "put the key in OPENAI_API_KEY"
        )
    return value.rstrip("/")


_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def check_bind_host(value: str) -> str:
    """Return the interface to listen on: an IP address (``[::1]`` gives ``::1``) or a host name.

    Raises:
        ValueError: it is empty, or neither an IP address nor a valid host name.
    """
    name = value.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name:
        raise ValueError("is empty: use 127.0.0.1 (this machine) or 0.0.0.0 (every interface)")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    labels = name.removesuffix(".").split(".")
    if len(name) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise ValueError(
            "is neither an IP address nor a host name (e.g. 127.0.0.1, ::1 or localhost)"
        )
    return name


def check_host_list(value: str) -> str:
    """Return ``value`` (``BOT_ALLOWED_HOSTS``) normalised: comma-separated host names or IP
    addresses (lower case, no ports, IPv6 without brackets), or ``*`` for any.

    Raises:
        ValueError: an entry is neither a host name nor an IP address.
    """
    names = [part.strip() for part in value.split(",") if part.strip()]
    if names == ["*"]:
        return "*"
    checked = []
    for name in names:
        try:
            checked.append(check_bind_host(name).lower().removesuffix("."))
        except ValueError:
            raise ValueError(
                f"must be host names or IP addresses separated by commas, or * for any "
                f"(e.g. bot.example.com,proxy); {shown(name)} is neither"
            ) from None
    return ",".join(checked)


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted_proxies(value: str) -> tuple[IPNetwork, ...]:
    """The networks of ``BOT_TRUSTED_PROXIES``: comma-separated IP addresses or CIDR blocks
    (``10.0.0.5``, ``172.29.76.0/24``, ``::1``); an empty value trusts no proxy.

    The one parser of the setting: the client address the service believes and anything else
    that trusts a proxy read the networks from here.

    Raises:
        ValueError: an entry is neither an address nor a network (host bits set included:
            ``10.0.0.5/24`` is refused rather than silently widened).
    """
    networks = []
    for part in value.split(","):
        entry = part.strip().removeprefix("[").replace("]", "")
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry))
        except ValueError:
            raise ValueError(
                "must be IP addresses or CIDR networks separated by commas (e.g. "
                f"172.29.76.10,10.0.0.0/8); {shown(part.strip())} is neither"
            ) from None
    return tuple(networks)


def check_trusted_proxies(value: str) -> str:
    """``value`` (``BOT_TRUSTED_PROXIES``) normalised: the networks of :func:`trusted_proxies`,
    comma-separated.

    Raises:
        ValueError: see :func:`trusted_proxies`.
    """
    return ",".join(str(network) for network in trusted_proxies(value))


_HEADER = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")


def check_header_name(value: str) -> str:
    """``value`` (``BOT_TRUSTED_USER_HEADER``) if it is an HTTP header name, in lower case.

    Raises:
        ValueError: it is not, or it is one the service reads itself.
    """
    name = value.strip().lower()
    if not _HEADER.fullmatch(name):
        raise ValueError(f"must be an HTTP header name like X-Forwarded-Email (got {shown(value)})")
    if name in {"authorization", "host", "origin", "content-type", "content-length", "cookie"}:
        raise ValueError(f"{shown(value)} is a header the service reads for another purpose")
    return name


# ------------------------------------------------------------------------------ pydantic types


def _as_pydantic(check: Callable[[str], str], code: str) -> AfterValidator:
    """``check`` as a pydantic validator whose error has the type ``code`` and its message."""

    def validate(value: str) -> str:
        try:
            return check(value)
        except ValueError as exc:
            # The message goes in the context: a template would read braces in it as fields.
            raise PydanticCustomError(code, "{reason}", {"reason": str(exc)}) from None

    return AfterValidator(validate)


ConversationId = Annotated[
    str,
    _as_pydantic(check_conversation_id, "invalid_conversation_id"),
    WithJsonSchema({"type": "string", "pattern": CONVERSATION_ID_PATTERN}),
]
ModelId = Annotated[
    str,
    _as_pydantic(check_model_id, "invalid_model_id"),
    WithJsonSchema({"type": "string", "pattern": MODEL_ID_PATTERN}),
]
BaseURL = Annotated[str, _as_pydantic(check_base_url, "invalid_url")]
BindHost = Annotated[str, _as_pydantic(check_bind_host, "invalid_host")]
HostList = Annotated[str, _as_pydantic(check_host_list, "invalid_host_list")]
TrustedProxies = Annotated[str, _as_pydantic(check_trusted_proxies, "invalid_trusted_proxies")]
HeaderName = Annotated[str, _as_pydantic(check_header_name, "invalid_header_name")]

# ------------------------------------------------------------------------------ wording

_TYPE_WORDING = {
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "missing": "is required",
}


def wording(error: ErrorDetails) -> str:
    """What a pydantic error says, in the words of these rules (``must be a number``...).

    The context of a ``check_*`` rule's error is its message; common type errors get a short
    phrase; anything else keeps pydantic's message.
    """
    context: dict[str, Any] = dict(error.get("ctx") or {})
    if "reason" in context:
        return str(context["reason"])
    phrase = _TYPE_WORDING.get(error["type"])
    if phrase is not None:
        return phrase
    return str(error["msg"]).removeprefix("Value error, ")
