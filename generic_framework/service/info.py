"""``GET /v1/bot``: what the page needs to know about the bot before the first message.

Exactly ``{"offline": bool, "default_persona": "<name>" | null, "examples": ["...", ...],
"persona_examples": {"<name>": ["...", ...], ...}}``:

- ``offline``: answers come from a mock's recorded fixtures, not from Z.AI: the embedded mock
  (``generic-framework serve`` without an API key, or with ``--mock``), or a mock Z.AI server
  the base URL points at (compose's ``mock`` profile), found by :func:`mock_examples`.
- ``default_persona``: :func:`~generic_framework.runtime.default_persona`'s choice, the CLI's
  too (``BOT_DEFAULT_PERSONA``, else the first persona by name whose web search is on, else
  the first); ``null`` only when no persona is served.
- ``examples``: offline, the questions the fixtures have recorded answers for with the default
  persona (best demonstrations first; a mock server's own, from its ``GET /mock/examples``);
  online, none.
- ``persona_examples``: offline, the same for every served persona (a persona without
  recordings has an empty list), so the page offers only questions the chosen persona can ask;
  online, ``{}``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
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


def recorded_examples(settings: Settings, personas: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The bundled fixtures' questions for each persona on the configured kind of endpoint."""
    from generic_framework.mock import bundled_examples  # only offline: fixtures load on use

    endpoint = "coding" if settings.is_coding_endpoint else "general"
    return {name: tuple(bundled_examples(persona=name, endpoint=endpoint)) for name in personas}


def mock_examples(settings: Settings, personas: Iterable[str]) -> dict[str, tuple[str, ...]] | None:
    """The recorded questions of the mock Z.AI server ``OPENAI_BASE_URL`` points at, for each
    of ``personas``, or ``None`` when it is no such mock.

    Asked once, at start-up, and only of a plain ``http://`` endpoint (Z.AI is https; the
    compose ``mock`` profile's ``mock-zai`` is http): ``GET {origin}/mock/examples`` for each
    persona on the configured kind of endpoint. Any failure means "not a mock".
    """
    parts = urlsplit(settings.base_url)
    names = list(personas)
    if parts.scheme != "http" or not names:
        return None
    endpoint = "coding" if settings.is_coding_endpoint else "general"
    learnt: dict[str, tuple[str, ...]] = {}
    with httpx.Client(base_url=f"http://{parts.netloc}", timeout=MOCK_PROBE_TIMEOUT) as client:
        for name in names:
            found = _ask_mock(client, name, endpoint)
            if found is None:
                return None
            learnt[name] = found
    return learnt


def _ask_mock(client: httpx.Client, persona: str, endpoint: str) -> tuple[str, ...] | None:
    """One persona's recorded questions from a mock server; ``None`` when it is not one."""
    try:
        response = client.get("/mock/examples", params={"persona": persona, "endpoint": endpoint})
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
    first = state.default_persona
    body = BotInfoOut(
        offline=state.offline,
        default_persona=first,
        examples=list(state.examples.get(first, ())) if first is not None else [],
        persona_examples={name: list(found) for name, found in state.examples.items()},
    )
    return Response(body.model_dump_json(), media_type="application/json")
