"""``GET /v1/bot``: what the page needs to know about the bot before the first message.

Exactly ``{"offline": bool, "default_persona": "<name>" | null, "examples": ["...", ...]}``:

- ``offline``: answers come from the embedded mock's recorded fixtures (``generic-framework
  serve`` without an API key, or with ``--mock``), not from Z.AI.
- ``default_persona``: :func:`~generic_framework.runtime.default_persona`'s choice, the CLI's
  too (``BOT_DEFAULT_PERSONA``, else the first persona by name whose web search is on, else
  the first); ``null`` only when no persona is served.
- ``examples``: offline, the questions the fixtures have recorded answers for with the default
  persona (best demonstrations first); online, none.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from generic_framework.config import Settings
from generic_framework.service.schemas import BotInfoOut
from generic_framework.service.state import state_of

__all__ = ["bot_info", "recorded_examples"]


def recorded_examples(settings: Settings, persona: str | None) -> tuple[str, ...]:
    """The bundled fixtures' questions for ``persona`` on the configured kind of endpoint."""
    if persona is None:
        return ()
    from generic_framework.mock import bundled_examples  # only offline: fixtures load on use

    endpoint = "coding" if settings.is_coding_endpoint else "general"
    return tuple(bundled_examples(persona=persona, endpoint=endpoint))


async def bot_info(request: Request) -> Response:
    """``GET /v1/bot``: ``{"offline", "default_persona", "examples"}``."""
    state = state_of(request)
    body = BotInfoOut(
        offline=state.offline,
        default_persona=state.default_persona,
        examples=list(state.examples),
    )
    return Response(body.model_dump_json(), media_type="application/json")
