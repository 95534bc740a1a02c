"""The ``[memory]`` table of a persona file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from generic_framework.limits import MAX_ITEMS_LIMIT

__all__ = ["DEFAULT_MAX_ITEMS", "MemorySpec"]

DEFAULT_MAX_ITEMS = 20
"""The facts a persona keeps per user when its file does not say."""


class MemorySpec(BaseModel):
    """Whether a persona keeps facts about its users, and how many per user.

    Attributes:
        enabled: offer ``remember`` and ``forget`` and put the user's facts in the
            instructions (off unless the persona file says so).
        max_items: the most facts kept per user for this persona (1 to 200); ``remember``
            is refused beyond it until one is forgotten.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    max_items: int = Field(default=DEFAULT_MAX_ITEMS, ge=1, le=MAX_ITEMS_LIMIT)
