"""Resources: the one owner of a GLM client, a conversation store and the conversation locks.

:class:`~generic_framework.runtime.Runtime` is the public face (it adds the persona files); a
:class:`~generic_framework.core.persona.Persona` made without a runtime owns a private
:class:`Resources` and closes it in ``aclose()``. Nothing else in the library constructs clients
or stores. The client and the store are opened on first use, so a runtime that never answers a
conversation never opens a database file; closing closes what was opened, once, and leaves
borrowed objects open.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Self

import httpx

from generic_framework.config import Settings
from generic_framework.core.locks import ConversationLocks
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import ConfigError

if TYPE_CHECKING:
    # The store package (sqlite3 and its message adapter, about 3 ms) is imported when a
    # conversation first needs it, not by every program that imports the Persona (0704).
    from generic_framework.store.base import ConversationStore

__all__ = ["Resources"]


class Resources:
    """A GLM client, a conversation store and the per-conversation locks, owned together.

    Args:
        settings: the configuration; :meth:`Settings.defaults() <Settings.defaults>` (not the
            environment) when omitted.
        client: a client to borrow (never closed here); one is opened on first use otherwise.
        store: a store to borrow (never closed here); SQLite at ``settings.database_path`` is
            opened on first use otherwise.
        transport: an httpx transport for the owned client (tests, the recorder).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: GLMClient | None = None,
        store: ConversationStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.defaults()
        self.locks = ConversationLocks()
        self._client = client
        self._store = store
        self._transport = transport
        self._opened: list[GLMClient | ConversationStore] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.settings.base_url!r})"

    @property
    def client(self) -> GLMClient:
        """The GLM client (opened on first use)."""
        if self._client is None:
            self._check_open()
            self._client = GLMClient(self.settings, transport=self._transport)
            self._opened.append(self._client)
        return self._client

    @property
    def store(self) -> ConversationStore:
        """The conversation store (opened on first use)."""
        if self._store is None:
            self._check_open()
            from generic_framework.store.sqlite import SQLiteStore

            self._store = SQLiteStore(self.settings.database_path)
            self._opened.append(self._store)
        return self._store

    async def open(self) -> Self:
        """Open the client now, in a worker thread, and return ``self``.

        Building the client loads the CA bundle (tens of milliseconds); done on first use it
        would block the event loop, and every other task with it. ``async with`` calls this.
        """
        if self._client is None:
            self._check_open()
            client = await asyncio.to_thread(GLMClient, self.settings, transport=self._transport)
            if self._client is None:
                self._client = client
                self._opened.append(client)
            else:  # another task opened one meanwhile
                await client.aclose()
        return self

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._closed

    async def aclose(self) -> None:
        """Close what was opened here (not what was borrowed), once."""
        if self._closed:
            return
        self._closed = True
        opened, self._opened = self._opened, []
        try:
            for each in reversed(opened):
                await each.aclose()
        finally:
            # Closed objects are dropped: using the runtime after this is an error, not a
            # silent reopen.
            self._client = None if any(o is self._client for o in opened) else self._client
            self._store = None if any(o is self._store for o in opened) else self._store

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigError(f"{self!r} is closed")
