"""What the service's endpoints share: settings, personas, the store and the conversation locks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from starlette.requests import Request

from generic_framework.config import Settings
from generic_framework.service.turns import ConversationLocks, PersonaLike

__all__ = ["ServiceState", "StoreLike", "state_of"]


class StoreLike(Protocol):
    """The part of :class:`~generic_framework.core.history.ConversationStore` the API uses."""

    def get(self, conversation_id: str) -> Any:
        """The stored messages of a conversation, or None."""
        ...

    def delete(self, conversation_id: str) -> Any:
        """Remove a conversation; truthy when it existed."""
        ...


@dataclass
class ServiceState:
    """The service's shared objects, kept on ``app.state.service``.

    Attributes:
        settings: the configuration the service was built with.
        personas: persona name -> persona; the names are the API's model ids.
        store: the conversation store behind ``/v1/conversations``.
        locks: one lock per conversation id, so turns on one conversation run one at a time.
        closers: what to close at shutdown (the GLM client and store the service created).
    """

    settings: Settings
    personas: Mapping[str, PersonaLike]
    store: StoreLike
    locks: ConversationLocks = field(default_factory=ConversationLocks)
    closers: list[Callable[[], Awaitable[None] | None]] = field(default_factory=list)


def state_of(request: Request) -> ServiceState:
    """The :class:`ServiceState` of the app serving ``request``."""
    return cast(ServiceState, request.app.state.service)
