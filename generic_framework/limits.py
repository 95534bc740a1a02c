"""The value rules shared by settings, persona specs and the store: each limit is written once.

:class:`~generic_framework.config.Settings` (environment variables) and
:class:`~generic_framework.core.spec.PersonaSpec` (persona files and code) annotate their fields
with these types, so ``LLM_TEMPERATURE=2`` and ``temperature = 2`` in a persona file are refused by
the same rule.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

__all__ = [
    "CONVERSATION_ID_MAX",
    "PERSONA_NAME_PATTERN",
    "PersonaName",
    "Recency",
    "SearchCount",
    "Temperature",
    "ThinkingMode",
    "ToolRounds",
]

Temperature = Annotated[float, Field(ge=0.0, le=1.0)]
"""Sampling temperature: 0.0-1.0 (Z.AI's range)."""

ToolRounds = Annotated[int, Field(ge=0, le=50)]
"""Tool rounds per turn before the forced final answer; 0 turns tools off."""

SearchCount = Annotated[int, Field(ge=1, le=50)]
"""Results per web search (the Web Search API's range)."""

ThinkingMode = Literal["enabled", "disabled"]
Recency = Literal["oneDay", "oneWeek", "oneMonth", "oneYear", "noLimit"]

PERSONA_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
PersonaName = Annotated[str, StringConstraints(pattern=PERSONA_NAME_PATTERN)]
"""1-64 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit."""

CONVERSATION_ID_MAX = 256
"""The longest conversation id the store accepts."""
