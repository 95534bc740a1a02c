"""Resources: the one owner of a GLM client, a conversation store, the conversation locks and
the MCP sessions; and the chat model the personas' turns call (the client, unless another
:class:`~generic_framework.wire.model.ChatModel` is given).

:class:`~generic_framework.runtime.Runtime` is the public face (it adds the persona files); a
:class:`~generic_framework.core.persona.Persona` made without a runtime owns a private
:class:`Resources` and closes it in ``aclose()``. Nothing else in the library constructs clients,
stores or MCP sessions. The client and the store are opened on first use, so a runtime that never
answers a conversation never opens a database file, and an MCP server is started the first time
a turn needs its tools; closing closes what was opened, once (stopping every stdio MCP server),
and leaves borrowed objects open.

The store is the one ``DATABASE_URL`` names (SQLite in ``DATA_DIR`` when unset, PostgreSQL
otherwise); it holds the conversation for a turn (:meth:`Resources.conversation`: this process's
FIFO lock first, then the store's, across replicas on PostgreSQL). The upstream budget the client
takes its slots from is picked from the same setting without opening the store
(:meth:`Resources.upstream_slots`): this process's own slots, or on PostgreSQL slots shared by
every replica on their own connection (docs/design/0315). A turn without a conversation
therefore imports no database module.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Self

from generic_framework.config import Settings
from generic_framework.core.locks import ConversationLocks
from generic_framework.errors import ConfigError
from generic_framework.store import is_postgres_url, open_store
from generic_framework.telemetry import Telemetry
from generic_framework.wire.model import ChatModel
from generic_framework.wire.slots import LocalSlots, UpstreamSlots

if TYPE_CHECKING:
    import httpx

    from generic_framework.mcp_tools.sessions import MCPSessions

    # The store package (sqlite3 and its message adapter, about 3 ms) is imported when a
    # conversation first needs it, not by every program that imports the Persona (0704).
    from generic_framework.store.base import Conversations, ConversationStore, HeldConversation
    from generic_framework.store.chats import ChatStore
    from generic_framework.store.keys import ClaimStore
    from generic_framework.store.memories import MemoryStore
    from generic_framework.store.users import UserAdmin

    # The wire client and httpx under it (about a third of the public import) are imported
    # when the first client is made (0704).
    from generic_framework.wire.client import GLMClient

__all__ = ["Resources", "budget_id"]


def budget_id(settings: Settings) -> str:
    """Names the upstream budget of the settings' API key: a digest, never the key itself."""
    key = settings.api_key.get_secret_value() if settings.api_key is not None else ""
    return hashlib.sha256(f"generic_framework:{key}".encode()).hexdigest()[:16]


logger = logging.getLogger("generic_framework.runtime")

_NOTHING_HELD: AbstractAsyncContextManager[None] = nullcontext()
"""The context of a turn without a conversation (reusable: it holds nothing)."""


class Resources:
    """A GLM client, a conversation store, the per-conversation locks and the MCP sessions.

    Args:
        settings: the configuration; :meth:`Settings.defaults() <Settings.defaults>` (not the
            environment) when omitted.
        client: a client to borrow (never closed here); one is opened on first use otherwise.
        model: what answers the personas' model calls instead of the client: any
            :class:`~generic_framework.wire.model.ChatModel`, such as
            :class:`generic_framework.testing.FunctionModel` in a test. The client is then
            opened only if something still needs it (``search_web`` in ``client`` mode calls
            the Web Search API through it); :meth:`open` leaves it closed.
        store: a store to borrow (never closed here); otherwise the one ``DATABASE_URL``
            names (SQLite at ``settings.database_path`` when unset) is opened on first use.
        transport: an httpx transport for the owned client (tests, the recorder).
        telemetry: where turns and upstream calls are recorded; new metrics (and tracing when
            an OpenTelemetry provider is installed) when omitted.
        environ: where ``${VAR}`` in persona files' MCP servers is looked up; whoever read the
            environment passes it (``Runtime.from_env()``, the CLI, the service). Empty when
            omitted: library objects never read ``os.environ`` themselves.
        offline: the upstream is the embedded mock of the offline demo (the CLI's and the
            service's edge decide it: no API key, or ``--mock``); every stored turn's record
            says so, and ``usage`` counts such turns apart (docs/design/0326).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: GLMClient | None = None,
        model: ChatModel | None = None,
        store: ConversationStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        telemetry: Telemetry | None = None,
        environ: Mapping[str, str] | None = None,
        offline: bool = False,
    ) -> None:
        self.settings = settings if settings is not None else Settings.defaults()
        self.offline = offline
        self._model = model
        self.locks = ConversationLocks()
        if telemetry is None:
            capture = self.settings.otel_instrumentation_genai_capture_message_content
            telemetry = Telemetry.create(capture_content=capture)
        self.telemetry = telemetry
        if client is not None:
            self.telemetry.metrics.watch(client)
        self._environ = environ
        self._mcp: MCPSessions | None = None
        self._client = client
        self._store = store
        self._transport = transport
        self._opened: list[GLMClient | ConversationStore | UpstreamSlots] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.settings.base_url!r})"

    @property
    def client(self) -> GLMClient:
        """The GLM client (opened on first use)."""
        if self._client is None:
            self._check_open()
            self._client = self._new_client(self._slots())
            self._opened.append(self._client)
        return self._client

    @property
    def mcp(self) -> MCPSessions:
        """The MCP sessions (made on first use: a runtime whose personas have no MCP server
        and search without ``mcp`` mode never loads the connection code, docs/design/0704)."""
        if self._mcp is None:
            self._check_open()
            from generic_framework.mcp_tools.sessions import MCPSessions

            self._mcp = MCPSessions(self.settings, self._environ)
        return self._mcp

    @property
    def model(self) -> ChatModel:
        """What answers the personas' model calls: the ``model`` given, else :attr:`client`."""
        return self._model if self._model is not None else self.client

    @property
    def store(self) -> ConversationStore:
        """The conversation store (opened on first use)."""
        if self._store is None:
            self._check_open()
            url = self.settings.database_url
            self._store = open_store(
                url.get_secret_value() if url is not None else None,
                sqlite_path=self.settings.database_path,
                pool_size=self.settings.database_pool_size,
                pool_timeout=self.settings.database_pool_timeout,
                # A PostgreSQL database is initialised once, by `db upgrade`: never quietly
                # here, where an empty one is most often a lost volume (docs/design/0325).
                create=False,
            )
            self._opened.append(self._store)
        return self._store

    # The store in its parts: each user of the store asks for the one part it needs.

    @property
    def conversations(self) -> Conversations:
        """The stored conversations: a turn's, and their reading, listing and removal."""
        return self.store

    @property
    def users(self) -> UserAdmin:
        """The users, their API keys and the counters of their limits."""
        return self.store

    @property
    def chat_states(self) -> ChatStore:
        """The chat platforms' chats: each chat's persona and conversation, claimed updates."""
        return self.store

    @property
    def memories(self) -> MemoryStore:
        """The facts personas keep about their users (:mod:`~generic_framework.store.memories`)."""
        return self.store

    @property
    def claims(self) -> ClaimStore:
        """Claims held once across replicas (the service's ``Idempotency-Key``)."""
        return self.store

    def _slots(self) -> UpstreamSlots:
        """A new upstream budget for the owned client, closed after it."""
        slots = self.upstream_slots()
        self._opened.append(slots)
        return slots

    def upstream_slots(self) -> UpstreamSlots:
        """The upstream budget the configuration names: shared by every replica through
        PostgreSQL's advisory locks when ``DATABASE_URL`` names PostgreSQL (on a connection of
        its own, opened at the first call), this process's :class:`LocalSlots` otherwise."""
        s = self.settings
        url = s.database_url.get_secret_value() if s.database_url is not None else None
        if is_postgres_url(url):
            from generic_framework.store.postgres_slots import PostgresSlots

            return PostgresSlots(
                str(url),
                budget=budget_id(s),
                limit=s.llm_max_concurrency,
                wait=s.llm_queue_timeout,
                timeout=s.database_pool_timeout,
                create=False,
            )
        return LocalSlots(s.llm_max_concurrency, s.llm_queue_timeout)

    def conversation(
        self, conversation_id: str | None
    ) -> AbstractAsyncContextManager[HeldConversation | None]:
        """Hold a conversation for one turn: this process's FIFO lock, then the store's lock
        (across replicas on PostgreSQL). ``None`` for no conversation: nothing is held (one
        shared context, so a turn without a conversation keeps no generator alive).

        Turns on one conversation queue here in arrival order, so at most one connection per
        process waits on the store's lock.
        """
        if conversation_id is None:
            return _NOTHING_HELD
        return self._held(conversation_id)

    @asynccontextmanager
    async def _held(self, conversation_id: str) -> AsyncIterator[HeldConversation]:
        history = self.settings.history_turns  # what the turn loads, read with the lock
        async with (
            self.locks.hold(conversation_id),
            self.store.lock(conversation_id, history=history) as held,
        ):
            yield held

    async def open(self) -> Self:
        """Open the client now, in a worker thread, and return ``self``.

        Building the client loads the CA bundle (tens of milliseconds); done on first use it
        would block the event loop, and every other task with it. ``async with`` calls this.
        With a ``model`` given, the client is left to be opened on first use, if ever.
        """
        if self._client is None and self._model is None:
            self._check_open()
            slots = self._slots()
            client = await asyncio.to_thread(self._new_client, slots)
            if self._client is None:
                self._client = client
                self._opened.append(client)
                logger.info("%s", self.settings.describe_search())
            else:  # another task opened one meanwhile
                await client.aclose()
                self._opened.remove(slots)
                await slots.aclose()
        return self

    def _new_client(self, slots: UpstreamSlots) -> GLMClient:
        """An owned client taking its slots from ``slots`` and reporting to the metrics."""
        from generic_framework.wire.client import GLMClient

        metrics = self.telemetry.metrics
        client = GLMClient(self.settings, transport=self._transport, observer=metrics, slots=slots)
        metrics.watch(client)
        return client

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` ran."""
        return self._closed

    async def aclose(self) -> None:
        """Close what was opened here (not what was borrowed), once: MCP sessions (and their
        stdio children), then the store and the client; export buffered spans."""
        if self._closed:
            return
        self._closed = True
        opened, self._opened = self._opened, []
        try:
            # MCP sessions first: a search in flight uses the client's key, not the client.
            if self._mcp is not None:
                await self._mcp.aclose()
            for each in reversed(opened):
                await each.aclose()
            await self.telemetry.flush()
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
