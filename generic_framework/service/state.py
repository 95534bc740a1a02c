"""What the service's endpoints share: the runtime and the personas it serves.

One owner: the :class:`~generic_framework.runtime.Runtime` holds the GLM client, the
conversation store and the per-conversation locks. The personas write their turns to
``runtime.store`` under ``runtime.locks``; ``/v1/conversations`` reads and deletes through the
same store and locks, so there is one store and one lock system per app.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, cast

from starlette.requests import Request

from generic_framework.config import Settings
from generic_framework.runtime import Runtime
from generic_framework.turns import TurnPersona

__all__ = ["Drain", "PersonaLike", "ServiceState", "state_of"]


class PersonaLike(TurnPersona, Protocol):
    """What the service needs from a persona (:class:`~generic_framework.core.persona.Persona`):
    what the turn service runs (:class:`~generic_framework.turns.TurnPersona`), and what
    ``/v1/models`` and a request's checks read: its ``spec`` (name, description, whether a
    request's system messages are accepted, the client parameters it pins, its round cap).

    A persona serialises the turns of a conversation itself (a
    :class:`~generic_framework.core.persona.Persona` holds ``runtime.locks`` for the whole
    turn); the service adds no lock of its own around a turn.
    """


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
