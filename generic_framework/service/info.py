"""``GET /v1/bot``: what the web page needs before the first message.

``{"offline": bool, "default_persona": "<name>", "examples": ["<recorded question>", ...]}``:
``offline`` is true when the service has no API key (its answers can only come from recorded
fixtures); ``examples`` are then the recorded questions of the default persona. The default
persona is ``BOT_DEFAULT_PERSONA`` when it names a served persona, else the first persona (by
name) whose web search is not off, else the first persona.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from generic_framework.service.schemas import BotInfoOut
from generic_framework.service.state import PersonaLike, state_of

__all__ = ["bot_info", "default_persona"]


def _searches(persona: PersonaLike) -> bool:
    web = getattr(persona, "web_search", None)
    return web is not None and getattr(web, "mode", None) != "off"


def default_persona(configured: str, personas: Mapping[str, PersonaLike]) -> str:
    """The persona the page starts with ("" when none is served)."""
    if configured in personas:
        return configured
    names = sorted(personas)
    searching = [name for name in names if _searches(personas[name])]
    return (searching or names or [""])[0]


def _examples(persona: str, coding: bool) -> list[str]:
    from generic_framework.mock import bundled_examples

    return bundled_examples(persona=persona, endpoint="coding" if coding else "general")


async def bot_info(request: Request) -> Response:
    """``GET /v1/bot``: offline or not, the default persona, the recorded questions."""
    state = state_of(request)
    settings = state.settings
    offline = not settings.has_api_key
    default = default_persona(settings.bot_default_persona, state.personas)
    examples = _examples(default, settings.is_coding_endpoint) if offline and default else []
    body = BotInfoOut(offline=offline, default_persona=default, examples=examples)
    return Response(body.model_dump_json(), media_type="application/json")
