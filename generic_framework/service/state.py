"""What the service's endpoints share: the runtime and the personas it serves.

One owner: the :class:`~generic_framework.runtime.Runtime` holds the GLM client, the
conversation store and the per-conversation locks. The personas write their turns to
``runtime.store`` under ``runtime.locks``; ``/v1/conversations`` reads and deletes through the
same store and locks, so there is one store and one lock system per app.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, cast

from starlette.requests import Request

from generic_framework.config import Settings
from generic_framework.core.events import PersonaEvent
from generic_framework.core.history import HistoryItem
from generic_framework.core.options import TurnOptions
from generic_framework.core.reply import Reply
from generic_framework.core.spec import PersonaSpec
from generic_framework.runtime import Runtime
from generic_framework.store.users import Caller

__all__ = ["Drain", "PersonaLike", "ServiceState", "state_of"]


class PersonaLike(Protocol):
    """What the service needs from a persona (:class:`~generic_framework.core.persona.Persona`).

    A persona serialises the turns of a conversation itself (a
    :class:`~generic_framework.core.persona.Persona` holds ``runtime.locks`` for the whole
    turn); the service adds no lock of its own around a turn.
    """

    @property
    def spec(self) -> PersonaSpec:
        """The persona's fields: its name (the API's model id), its description (one line for
        ``/v1/models``), whether a request's system messages are accepted, the client
        parameters it pins, its round cap (a :class:`~generic_framework.core.persona.Persona`'s
        is the resolved spec)."""
        ...

    async def respond(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[HistoryItem] | None = None,
        options: TurnOptions | None = None,
        caller: Caller | None = None,
    ) -> Reply:
        """Answer one user message (``history``: the earlier messages of a stateless request;
        ``options``: the client's sampling settings, output format and tools;
        ``conversation_id``: the store's key of the conversation, store/users.py; ``caller``:
        who asks)."""
        ...

    def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[HistoryItem] | None = None,
        options: TurnOptions | None = None,
        caller: Caller | None = None,
    ) -> AsyncGenerator[PersonaEvent, None]:
        """Answer one user message as events ending with ``Done``; closable (``aclose``)."""
        ...


class Drain:
    """Whether the service is draining: stopping, but still serving for a while.

    ``serve`` begins the drain on SIGTERM (:class:`~generic_framework.service.server.
    DrainingServer`): from then on ``/readyz`` answers 503 ``draining``, so a proxy checking it
    sends the replica no new request, while the requests it still gets are served as before.
    """

    __slots__ = ("_draining",)

    def __init__(self) -> None:
        self._draining = False

    @property
    def draining(self) -> bool:
        """True once :meth:`begin` was called."""
        return self._draining

    def begin(self) -> None:
        """Start draining (for good: a draining service only stops)."""
        self._draining = True


@dataclass(frozen=True, slots=True)
class ServiceState:
    """The service's shared objects, kept on ``app.state.service``.

    Attributes:
        runtime: the client, store and locks (see :mod:`generic_framework.runtime`).
        personas: persona name -> persona; the names are the API's model ids.
        owns_runtime: True when the app built the runtime and closes it at shutdown; a
            runtime given to :func:`~generic_framework.service.create_app` is borrowed.
        offline: answers come from the embedded mock (``serve`` without a key, or ``--mock``).
        default_persona: the persona offered first (``GET /v1/bot``; service/info.py).
        examples: offline, persona name -> the questions the mock has recorded answers for
            with that persona (best demonstrations first); empty online.
        drain: whether the service is stopping (``/readyz`` then answers 503 ``draining``).
    """

    runtime: Runtime
    personas: Mapping[str, PersonaLike]
    owns_runtime: bool
    offline: bool = False
    default_persona: str | None = None
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    drain: Drain = field(default_factory=Drain)

    @property
    def settings(self) -> Settings:
        """The configuration: the runtime's settings."""
        return self.runtime.settings


def state_of(request: Request) -> ServiceState:
    """The :class:`ServiceState` of the app serving ``request``."""
    return cast(ServiceState, request.app.state.service)
