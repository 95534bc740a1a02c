"""The clients under test, one module each, behind one small interface.

Every module has ``async def open_driver(base_url, options) -> Driver``. A driver runs the job of
:mod:`benchmarks.job` once per :meth:`Driver.converse` call (two HTTP requests, the tool run
locally in between) and returns the final answer text. Sync-only libraries set ``sync = True`` and
implement :meth:`Driver.converse_sync` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ClientSpec:
    """How to run one client: its module, the import that must succeed, and a table label."""

    name: str
    module: str
    needs: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)


class Driver:
    """Base class of the clients under test."""

    sync = False

    async def converse(self) -> str:
        """Run the two-round job once and return the final answer."""
        raise NotImplementedError

    def converse_sync(self) -> str:
        """The same, for sync-only libraries."""
        raise NotImplementedError

    async def converse_stream(self, first_delays: list[float]) -> tuple[str, int]:
        """Run the job streamed; append the first text delta's delay; return (answer, deltas)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release the client's resources."""


CLIENTS: dict[str, ClientSpec] = {
    spec.name: spec
    for spec in (
        ClientSpec("raw_httpx", "benchmarks.clients.raw_httpx", "httpx", "raw httpx, pool 100"),
        ClientSpec(
            "raw_httpx_1000",
            "benchmarks.clients.raw_httpx",
            "httpx",
            "raw httpx, pool 1000",
            {"max_connections": 1000},
        ),
        ClientSpec(
            "typed_httpx",
            "benchmarks.clients.typed_httpx",
            "pydantic",
            "raw httpx + pydantic models (the typed floor)",
        ),
        ClientSpec(
            "stored_httpx",
            "benchmarks.clients.stored_httpx",
            "psycopg",
            "raw httpx + each turn in PostgreSQL by hand (the stored floor)",
        ),
        ClientSpec("persona", "benchmarks.clients.persona", "generic_framework", "Persona"),
        ClientSpec(
            "glmclient", "benchmarks.clients.glmclient", "generic_framework", "GLMClient hand loop"
        ),
        ClientSpec("openai", "benchmarks.clients.openai_sdk", "openai", "openai AsyncOpenAI"),
        ClientSpec("zai", "benchmarks.clients.zai_sdk", "zai", "zai-sdk (sync)"),
        ClientSpec(
            "pydantic_ai",
            "benchmarks.clients.pydantic_ai_agent",
            "pydantic_ai",
            "pydantic-ai Agent",
        ),
        ClientSpec("litellm", "benchmarks.clients.litellm_peer", "litellm", "LiteLLM acompletion"),
    )
}
