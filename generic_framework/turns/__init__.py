"""The turn service: one way from every edge to a persona (see :mod:`.service`)."""

from generic_framework.turns.service import (
    Ask,
    OptionRefused,
    PersonaNotAllowed,
    TurnPersona,
    TurnRefused,
    TurnService,
    allowed,
)

__all__ = [
    "Ask",
    "OptionRefused",
    "PersonaNotAllowed",
    "TurnPersona",
    "TurnRefused",
    "TurnService",
    "allowed",
]
