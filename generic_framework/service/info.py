"""``GET /v1/bot``: what the page needs to know about the bot before the first message.

Exactly ``{"offline": bool, "default_persona": "<name>" | null, "examples": ["...", ...],
"persona_examples": {"<name>": ["...", ...], ...}}``:

- ``offline``: answers come from the embedded mock's recorded fixtures (``generic-framework
  serve`` without an API key, or with ``--mock``), not from Z.AI.
- ``default_persona``: ``BOT_DEFAULT_PERSONA``, else the first persona (by name) whose web
  search is on, else the first persona; ``null`` only when no persona is served.
- ``examples``: offline, the questions the fixtures have recorded answers for with the default
  persona (best demonstrations first); online, none.
- ``persona_examples``: offline, the same for every served persona (a persona without
  recordings has an empty list), so the page offers only questions the chosen persona can ask;
  online, ``{}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from starlette.requests import Request
from starlette.responses import Response

from generic_framework.config import Settings
from generic_framework.service.schemas import BotInfoOut
from generic_framework.service.state import PersonaLike, state_of
from generic_framework.wire.errors import ConfigError

__all__ = ["bot_info", "default_persona", "recorded_examples"]


def _searches(persona: PersonaLike) -> bool:
    search = getattr(persona, "web_search", None)
    return search is not None and getattr(search, "mode", "off") != "off"


def default_persona(settings: Settings, personas: Mapping[str, PersonaLike]) -> str | None:
    """The persona offered first (see the module docstring).

    Raises:
        ConfigError: ``BOT_DEFAULT_PERSONA`` names no served persona.
    """
    chosen = settings.bot_default_persona
    if chosen is not None:
        if chosen not in personas:
            known = ", ".join(sorted(personas)) or "none"
            raise ConfigError(f"BOT_DEFAULT_PERSONA {chosen!r} is not a persona (known: {known})")
        return chosen
    names = sorted(personas)
    searching = [name for name in names if _searches(personas[name])]
    ranked = searching or names
    return ranked[0] if ranked else None


def recorded_examples(settings: Settings, personas: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The bundled fixtures' questions for each persona on the configured kind of endpoint."""
    from generic_framework.mock import bundled_examples  # only offline: fixtures load on use

    endpoint = "coding" if settings.is_coding_endpoint else "general"
    return {name: tuple(bundled_examples(persona=name, endpoint=endpoint)) for name in personas}


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
