"""A first answer loads only what it uses (docs/design/0704).

In a fresh interpreter a Persona on a Runtime answers one plain question from the mock Z.AI
server; then ``sys.modules`` is read. A persona without MCP servers loads no MCP connection
code, and a turn without a conversation or a caller loads no store module and not the edges'
turn service; a persona without memory loads neither the memory's tools nor its store's module,
and a turn without pictures not the store's picture type. The same probe with an MCP server
declared, with memory, and with a stored conversation, shows the modules are the ones those
turns load (so the probe sees what it claims to).
The public import alone loads none of them either, nor the wire client and httpx under it (the
first client made imports them), and neither it nor a plain first answer builds the validators
of the models only streams and the Web Search and Reader APIs use (``defer_build``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from generic_framework.mock import MockServer

_PROBE = r"""
import asyncio, json, sys

from generic_framework import Persona, Runtime, Settings

base_url, data_dir, mode = sys.argv[1:4]


async def main():
    fields = {}
    if mode == "mcp":
        fields["mcp_servers"] = [{"name": "files", "command": "never-started"}]
    if mode == "memory":
        fields["memory"] = {"enabled": True}
    settings = Settings.defaults(api_key="probe-key", base_url=base_url, data_dir=data_dir)
    async with Runtime(settings) as runtime:
        persona = Persona(
            "probe", "You answer briefly.", web_search=False, runtime=runtime, **fields
        )
        conversation = "probe-conversation" if mode == "stored" else None
        reply = await persona.respond(
            "What is the capital of Canada?", conversation_id=conversation
        )
    assert "Ottawa" in reply.content, reply


if mode != "import":
    asyncio.run(main())
messages = sys.modules["generic_framework.wire.messages"]
built = [name for name in DEFERRED if getattr(messages, name).__pydantic_complete__]
if mode == "import" and sys.modules["generic_framework.config"].Settings.__pydantic_complete__:
    built.append("Settings")
print(json.dumps({"modules": sorted(sys.modules), "built": built}))
"""

DEFERRED = (
    "ChatCompletionChunk",
    "ChunkChoice",
    "ContentDelta",
    "Delta",
    "ReaderResponse",
    "ReaderResult",
    "ReasoningDelta",
    "StreamCompleted",
    "ToolCallDelta",
    "WebSearchResponse",
)
"""The wire models no non-streamed answer uses, built on their first use (docs/design/0704)."""

NOT_ON_A_PLAIN_FIRST_ANSWER = (
    "generic_framework.mcp_tools.connection",
    "generic_framework.mcp_tools.sessions",
    "generic_framework.mcp_tools.tools",
    "generic_framework.memory.tools",
    "generic_framework.store.base",
    "generic_framework.store.keys",
    "generic_framework.store.memories",
    "generic_framework.store.pictures",
    "generic_framework.store.sqlite",
    "generic_framework.store.users",
    "generic_framework.turns",
    "sqlite3",
)

NOT_ON_THE_PUBLIC_IMPORT = ("generic_framework.wire.client", "httpx", "httpcore")
"""What the first client made imports: the public import (with ``Runtime``) leaves them to it."""


@pytest.fixture(scope="module")
def mock() -> Iterator[MockServer]:
    with MockServer() as server:  # the bundled fixtures: plain_answer answers the question
        yield server


def _probe(mock: MockServer, data_dir: Path, mode: str) -> dict[str, list[str]]:
    """What a fresh interpreter loaded, and which deferred models it built."""
    code = f"DEFERRED = {DEFERRED!r}\n{_PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", code, mock.base_url, str(data_dir), mode],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _modules(mock: MockServer, data_dir: Path, mode: str) -> set[str]:
    return set(_probe(mock, data_dir, mode)["modules"])


def test_a_plain_first_answer_loads_no_mcp_store_or_edge_modules(
    mock: MockServer, tmp_path: Path
) -> None:
    found = _probe(mock, tmp_path, "plain")
    assert "generic_framework.core.persona" in found["modules"]
    assert [name for name in NOT_ON_A_PLAIN_FIRST_ANSWER if name in found["modules"]] == []
    assert found["built"] == []
    # The control for the public import's probe: the answer did load the client.
    assert set(NOT_ON_THE_PUBLIC_IMPORT) <= set(found["modules"])


def test_the_public_import_loads_none_of_them_and_builds_no_deferred_model(
    mock: MockServer, tmp_path: Path
) -> None:
    found = _probe(mock, tmp_path, "import")
    assert {"generic_framework.core.persona", "generic_framework.config"} <= set(found["modules"])
    assert [name for name in NOT_ON_A_PLAIN_FIRST_ANSWER if name in found["modules"]] == []
    assert [name for name in NOT_ON_THE_PUBLIC_IMPORT if name in found["modules"]] == []
    assert found["built"] == []


def test_a_persona_with_mcp_servers_loads_the_sessions(mock: MockServer, tmp_path: Path) -> None:
    modules = _modules(mock, tmp_path, "mcp")
    assert "generic_framework.mcp_tools.sessions" in modules
    assert "generic_framework.store.base" not in modules


def test_a_persona_with_memory_loads_its_tools(mock: MockServer, tmp_path: Path) -> None:
    modules = _modules(mock, tmp_path, "memory")
    assert {"generic_framework.memory.tools", "generic_framework.store.memories"} <= modules
    assert "generic_framework.mcp_tools.sessions" not in modules


def test_a_stored_turn_loads_the_store(mock: MockServer, tmp_path: Path) -> None:
    modules = _modules(mock, tmp_path, "stored")
    assert {"generic_framework.store.base", "generic_framework.store.sqlite", "sqlite3"} <= modules
    assert "generic_framework.store.pictures" in modules  # a stored turn's pictures' rows
    assert "generic_framework.mcp_tools.sessions" not in modules
