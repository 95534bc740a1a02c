"""The chat platforms, registered in one place: the ``generic_framework.chat_platforms``
entry-point group.

Each entry names a :class:`ChatPlatform` object (Telegram's is
``generic_framework.chats.telegram.platform:PLATFORM``), so a package of someone else's adds a
platform by declaring one entry in its own metadata. ``serve`` asks every platform whether its
settings configure a webhook (:func:`webhook_factories`, at start, before a port is bound: a bad
setting is a :class:`~generic_framework.errors.ConfigError` then) and mounts what each factory
builds over the app's runtime: its path, its receiver, its start and stop. The service names no
platform; a platform's library is imported only when its webhook is built (or its own command
runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime

__all__ = [
    "ENTRY_POINTS",
    "ChatPlatform",
    "Webhook",
    "WebhookFactory",
    "platforms",
    "webhook_factories",
]

ENTRY_POINTS = "generic_framework.chat_platforms"
"""The entry-point group of the chat platforms."""


class Webhook(Protocol):
    """A platform's webhook receiver in ``serve``."""

    @property
    def path(self) -> str:
        """Where the platform posts its updates (the route is outside the API's auth: the
        receiver checks the platform's own secret)."""
        ...

    async def start(self) -> None:
        """Start the bot behind it (and register the webhook with the platform)."""
        ...

    async def stop(self, grace: float) -> None:
        """Finish the updates under way (at most ``grace`` seconds), then stop."""
        ...

    async def endpoint(self, request: Request) -> Response:
        """One request of the platform."""
        ...


WebhookFactory = Callable[[Runtime, bool], Webhook]
"""Builds a platform's webhook over a runtime (``True``: answers come from the embedded mock)."""


class ChatPlatform(Protocol):
    """A chat platform as the registry knows it."""

    @property
    def name(self) -> str:
        """Its short lowercase name (``telegram``): user names, chat states, metrics."""
        ...

    def webhook(self, environ: Mapping[str, str]) -> WebhookFactory | None:
        """Its webhook's factory when ``environ`` configures one, else ``None`` (its secrets
        are registered for redaction either way).

        Raises:
            ConfigError: a setting of the platform is invalid.
        """
        ...


def platforms() -> dict[str, ChatPlatform]:
    """The registered platforms by name.

    Raises:
        ConfigError: an entry does not load, or two entries share a name.
    """
    found: dict[str, ChatPlatform] = {}
    for entry in entry_points(group=ENTRY_POINTS):
        try:
            platform = entry.load()
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"the chat platform {entry.name!r} does not load ({exc})") from None
        if platform.name in found:
            raise ConfigError(f"two chat platforms are named {platform.name!r}")
        found[platform.name] = platform
    return found


def webhook_factories(environ: Mapping[str, str]) -> list[WebhookFactory]:
    """The webhooks ``environ`` configures, one factory per platform that has one."""
    factories = []
    for platform in platforms().values():
        factory = platform.webhook(environ)
        if factory is not None:
            factories.append(factory)
    return factories
