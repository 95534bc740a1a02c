"""Runtime: the one place that wires a deployment together.

A :class:`Runtime` owns the GLM client, the conversation store, the per-conversation locks and
the MCP sessions (see :class:`~generic_framework.core.resources.Resources`), reads the persona
files of ``PERSONAS_DIR`` and hands out personas bound to it. The CLI (every command), the
service, the recorder, the replay runner and the benchmarks get their personas from a runtime::

    async with Runtime.from_env() as runtime:
        scout = runtime.persona("scout")
        reply = await scout.respond("// what's the weather in Nanaimo?", conversation_id="u42")

Closing the runtime closes everything it opened, once (stdio MCP servers are stopped then);
personas bound to it stay usable only while it is open.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.core.resources import Resources
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.telemetry import Telemetry
from generic_framework.wire.model import ChatModel

if TYPE_CHECKING:
    import httpx

    from generic_framework.store.base import ConversationStore
    from generic_framework.turns import TurnService
    from generic_framework.wire.client import GLMClient

__all__ = ["Runtime", "choose_spec", "default_persona", "read_specs"]


def default_persona(settings: Settings, personas: Mapping[str, Any]) -> str | None:
    """The persona chosen when none is named: the one rule of every entry point (``chat``,
    ``record``, :meth:`Runtime.persona`, the service and the page's ``GET /v1/bot``).

    ``BOT_DEFAULT_PERSONA``, else the first persona (by name) whose web search is on (its own
    ``[web_search] mode``, else ``WEB_SEARCH_MODE``), else the first by name; ``None`` when
    ``personas`` (specs, or personas and other objects with a ``spec``, by name) is empty.

    Raises:
        ConfigError: ``BOT_DEFAULT_PERSONA`` names none of ``personas``.
    """
    chosen = settings.bot_default_persona
    if chosen is not None:
        if chosen not in personas:
            known = ", ".join(sorted(personas)) or "none"
            raise ConfigError(f"BOT_DEFAULT_PERSONA {chosen!r} is not a persona (known: {known})")
        return chosen
    names = sorted(personas)
    searching = [name for name in names if _searches(personas[name], settings)]
    ranked = searching or names
    return ranked[0] if ranked else None


def _searches(persona: Any, settings: Settings) -> bool:
    spec = persona if isinstance(persona, PersonaSpec) else getattr(persona, "spec", None)
    search = getattr(spec, "web_search", None)
    if search is None:  # an object with no web search at all
        return False
    return bool((getattr(search, "mode", None) or settings.web_search_mode) != "off")


def read_specs(directory: str | Path, *, required: bool = False) -> dict[str, PersonaSpec]:
    """The persona files of ``directory``, by name.

    Args:
        required: raise when there is none (what every command that answers needs).

    Raises:
        ConfigError: the directory is missing, a file is invalid, or ``required`` and the
            directory has no persona file.
    """
    # The persona files' reader (tomllib, the example tools: about 6 ms) is imported when
    # they are first read, not by every program that imports the Runtime.
    from generic_framework.core.loader import load_specs

    specs = load_specs(Path(directory))
    return _required(specs, directory) if required else specs


def _required(specs: dict[str, PersonaSpec], directory: str | Path) -> dict[str, PersonaSpec]:
    if not specs:
        raise ConfigError(
            f"no persona files (*.toml) in {str(directory)!r}: add one, or set PERSONAS_DIR "
            "to a folder of them"
        )
    return specs


def choose_spec(
    specs: Mapping[str, PersonaSpec], name: str | None = None, *, settings: Settings
) -> PersonaSpec:
    """The spec called ``name``; without a name :func:`default_persona`'s choice.

    Raises:
        ConfigError: no persona of that name, or ``BOT_DEFAULT_PERSONA`` naming none.
    """
    if name is None:
        name = default_persona(settings, specs)
    spec = specs.get(name or "")
    if spec is None:
        raise ConfigError(f"unknown persona {name!r}; available: {', '.join(sorted(specs))}")
    return spec


class Runtime(Resources):
    """Client, store, locks, MCP sessions and personas for one deployment.

    Args:
        settings: the configuration; :meth:`Settings.defaults` when omitted (use
            :meth:`from_env` to read the environment).
        client: a client to borrow (never closed here).
        model: what answers the personas' model calls instead of the client (a
            :class:`~generic_framework.wire.model.ChatModel`, such as
            :class:`generic_framework.testing.FunctionModel` in a test).
        store: a store to borrow (never closed here).
        transport: an httpx transport for the owned client (tests, the recorder).
        personas_dir: where the persona files are (``settings.personas_dir`` when omitted).
        telemetry: metrics and tracing to record to (see
            :class:`~generic_framework.core.resources.Resources`).
        environ: the variables ``${VAR}`` in persona files' MCP servers are taken from
            (:meth:`from_env`, the CLI and the service pass ``os.environ``; none otherwise).
        specs: the personas by name, already read (:func:`read_specs`) or built in code;
            ``personas_dir`` is then not read.
        offline: the upstream is the embedded mock of the offline demo: stored turns are
            marked as not billed (see :class:`~generic_framework.core.resources.Resources`).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        client: GLMClient | None = None,
        model: ChatModel | None = None,
        store: ConversationStore | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        personas_dir: str | Path | None = None,
        telemetry: Telemetry | None = None,
        environ: Mapping[str, str] | None = None,
        specs: Mapping[str, PersonaSpec] | None = None,
        offline: bool = False,
    ) -> None:
        super().__init__(
            settings,
            client=client,
            model=model,
            store=store,
            transport=transport,
            telemetry=telemetry,
            environ=environ,
            offline=offline,
        )
        self.personas_dir = Path(personas_dir or self.settings.personas_dir)
        self._specs: dict[str, PersonaSpec] | None = dict(specs) if specs is not None else None
        self._personas: dict[str, Persona] = {}
        self._turns: TurnService | None = None

    @property
    def turns(self) -> TurnService:
        """The turn service every edge asks for turns: it admits the caller, runs the persona
        and counts the turn (:mod:`generic_framework.turns`); one per runtime."""
        if self._turns is None:
            # The edges' admission (users, limits, hooks) is loaded by the edges that ask for
            # it, not by a program that answers with personas alone (docs/design/0704).
            from generic_framework.turns import TurnService

            self._turns = TurnService(self)
        return self._turns

    @classmethod
    def from_env(cls, **overrides: Any) -> Runtime:
        """A runtime on ``Settings(**overrides)``: arguments first, then the environment, which
        also supplies the ``${VAR}`` values of persona files' MCP servers.

        Raises:
            ConfigError: a setting is invalid.
        """
        return cls(Settings(**overrides), environ=os.environ)

    def specs(self, *, required: bool = False) -> dict[str, PersonaSpec]:
        """The persona files of :attr:`personas_dir`, by name (read once, then cached).

        Args:
            required: raise when there is none (what every command that answers needs).

        Raises:
            ConfigError: the directory is missing, a file is invalid, or ``required`` and the
                directory has no persona file.
        """
        if self._specs is None:
            self._specs = read_specs(self.personas_dir)
        return _required(self._specs, self.personas_dir) if required else self._specs

    def spec(self, name: str | None = None) -> PersonaSpec:
        """The spec of the persona called ``name``; reading it opens nothing.

        Without a name: :func:`default_persona`'s choice. Entry points call this to refuse a
        bad name before they start anything.

        Raises:
            ConfigError: no persona files, no persona of that name, or ``BOT_DEFAULT_PERSONA``
                naming none.
        """
        return choose_spec(self.specs(required=True), name, settings=self.settings)

    def persona(self, name: str | None = None) -> Persona:
        """The persona called ``name``, bound to this runtime (one object per name).

        Without a name: :func:`default_persona`'s choice.

        Raises:
            ConfigError: no persona files, no persona of that name, or ``BOT_DEFAULT_PERSONA``
                naming none.
        """
        self._check_open()
        if name is not None and name in self._personas:
            return self._personas[name]
        spec = self.spec(name)
        if spec.name not in self._personas:
            from generic_framework.core.loader import resolve_tools

            tools = resolve_tools(spec, source=spec.name)
            self._personas[spec.name] = Persona.from_spec(spec, tools=tools, runtime=self)
        return self._personas[spec.name]

    def personas(self) -> dict[str, Persona]:
        """Every persona of :attr:`personas_dir`, bound to this runtime, by name."""
        return {name: self.persona(name) for name in self.specs()}

    async def discover(self, personas: Iterable[Persona] | None = None) -> int:
        """Start the MCP servers of ``personas`` (default: every persona file) and list their
        tools now, instead of on each server's first turn; failures are logged, not raised.

        Returns:
            How many servers are running.
        """
        chosen = list(self.personas().values()) if personas is None else list(personas)
        counts = await asyncio.gather(
            *(
                self.mcp.discover(p.spec.mcp_servers, persona=p.spec.name)
                for p in chosen
                if p.spec.mcp_servers
            )
        )
        return sum(counts)
