"""``GET /v1/bot``: what the page needs to know about the bot before the first message.

Exactly ``{"offline": bool, "default_persona": "<name>" | null, "examples": ["...", ...]}``:

- ``offline``: answers come from a mock's recorded fixtures, not from Z.AI: the embedded mock
  (``generic-framework serve`` without an API key, or with ``--mock``), or a mock Z.AI server
  the base URL points at (compose's ``mock`` profile), found by :func:`mock_examples`.
- ``default_persona``: :func:`~generic_framework.runtime.default_persona`'s choice, the CLI's
  too (``BOT_DEFAULT_PERSONA``, else the first persona by name whose web search is on, else
  the first); ``null`` only when no persona is served.
- ``examples``: offline, the questions the fixtures have recorded answers for with the default
  persona (best demonstrations first; a mock server's own, from its ``GET /mock/examples``);
  online, none.
"""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import httpx
from starlette.requests import Request
from starlette.responses import Response

from generic_framework.config import Settings
from generic_framework.service.schemas import BotInfoOut
from generic_framework.service.state import state_of

__all__ = ["bot_info", "mock_examples", "recorded_examples"]

logger = logging.getLogger("generic_framework.service")

MOCK_PROBE_TIMEOUT = 2.0
"""Seconds the start-up question to a plain-http upstream (is it a mock?) may take."""


def recorded_examples(settings: Settings, persona: str | None) -> tuple[str, ...]:
    """The bundled fixtures' questions for ``persona`` on the configured kind of endpoint."""
    if persona is None:
        return ()
    from generic_framework.mock import bundled_examples  # only offline: fixtures load on use

    endpoint = "coding" if settings.is_coding_endpoint else "general"
    return tuple(bundled_examples(persona=persona, endpoint=endpoint))


def mock_examples(settings: Settings, persona: str | None) -> tuple[str, ...] | None:
    """The recorded questions of the mock Z.AI server ``OPENAI_BASE_URL`` points at, or
    ``None`` when it is no such mock.

    Asked once, at start-up, and only of a plain ``http://`` endpoint (Z.AI is https; the
    compose ``mock`` profile's ``mock-zai`` is http): ``GET {origin}/mock/examples`` for
    ``persona`` on the configured kind of endpoint. Any failure means "not a mock".
    """
    parts = urlsplit(settings.base_url)
    if parts.scheme != "http" or persona is None:
        return None
    endpoint = "coding" if settings.is_coding_endpoint else "general"
    try:
        response = httpx.get(
            f"http://{parts.netloc}/mock/examples",
            params={"persona": persona, "endpoint": endpoint},
            timeout=MOCK_PROBE_TIMEOUT,
        )
        found = response.json().get("examples") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        logger.debug("the upstream is not a mock Z.AI server (%s)", type(exc).__name__)
        return None
    if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
        return None
    return tuple(found)


async def bot_info(request: Request) -> Response:
    """``GET /v1/bot``: ``{"offline", "default_persona", "examples"}``."""
    state = state_of(request)
    body = BotInfoOut(
        offline=state.offline,
        default_persona=state.default_persona,
        examples=list(state.examples),
    )
    return Response(body.model_dump_json(), media_type="application/json")
