"""MCP tests: real MCP servers (stdio children, the mock's endpoint on loopback), scripted GLM.

The scripted Z.AI fake of tests/core (``zai_script``) and the fixture helpers of tests/mock are
imported, not copied.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
for _folder in ("core", "mock", "service"):
    if str(TESTS / _folder) not in sys.path:
        sys.path.append(str(TESTS / _folder))

from mcp_helpers import NOTES_SERVER  # noqa: E402
from zai_script import Script, make_settings  # noqa: E402

from generic_framework.config import Settings  # noqa: E402
from generic_framework.runtime import Runtime  # noqa: E402


@pytest.fixture(autouse=True)
def _no_retry_waits(no_retry_waits: None) -> None:
    """No test here waits between retries."""


@pytest.fixture
def notes(tmp_path: Path) -> dict[str, Any]:
    """A persona-file entry for the notes server as a stdio child, writing its pid."""
    return {
        "name": "notes",
        "command": sys.executable,
        "args": [str(NOTES_SERVER)],
        "env": {"NOTES_PID_FILE": str(tmp_path / "notes.pid")},
        "timeout": 15,
    }


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path, web_search_mode="off", tool_timeout=15.0)


@pytest.fixture
async def runtimes(settings: Settings) -> AsyncIterator[Callable[..., Runtime]]:
    """Runtimes over scripts; each script must be used up, each runtime is closed."""
    made: list[tuple[Runtime, Script]] = []

    def make(script: Script, *, custom: Settings | None = None, **extra: Any) -> Runtime:
        runtime = Runtime(custom or settings, transport=script, **extra)
        made.append((runtime, script))
        return runtime

    yield make
    for runtime, script in made:
        await runtime.aclose()
        script.assert_done()
