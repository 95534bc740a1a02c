"""The built-in search's ``search_prompt``: ours asks for ``[ref_N]`` markers (Z.AI's default
asks for none), a persona file or WEB_SEARCH_PROMPT may replace it, and an answer that cites
nothing still lists its sources."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, completion, make_settings, source

from generic_framework.cli.output import print_reply
from generic_framework.config import Settings
from generic_framework.core.loader import load_spec
from generic_framework.errors import ConfigError
from generic_framework.mock import MockServer, bundled_fixture_paths
from generic_framework.runtime import Runtime
from generic_framework.tools.web_search import DEFAULT_SEARCH_PROMPT
from generic_framework.wire.client import GLMClient

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]
REPO = Path(__file__).resolve().parents[2]


def search_prompt(request: dict[str, Any]) -> str | None:
    (tool,) = [t for t in request["tools"] if t["type"] == "web_search"]
    prompt: str | None = tool["web_search"].get("search_prompt")
    return prompt


def persona_file(tmp_path: Path, extra: str = "") -> Path:
    folder = tmp_path / "personas"
    folder.mkdir(exist_ok=True)
    (folder / "finder.toml").write_text(
        f'system_prompt = "Find things."\n\n[web_search]\nmode = "builtin"\n{extra}',
        encoding="utf-8",
    )
    return folder


async def ask(settings: Settings, client: GLMClient) -> None:
    async with Runtime(settings, client=client) as runtime:
        await runtime.persona("finder").respond("// anything new?")


def test_the_default_asks_for_markers_and_keeps_the_template_variable() -> None:
    assert "{{current_date}}" in DEFAULT_SEARCH_PROMPT
    assert "[ref_1]" in DEFAULT_SEARCH_PROMPT
    assert "without citing" not in DEFAULT_SEARCH_PROMPT


async def test_a_web_query_sends_our_search_prompt(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, personas_dir=persona_file(tmp_path))
    fake = script(completion("Nothing [ref_1].", web_search=[source(1)]))
    await ask(settings, client_for(fake, settings))
    assert search_prompt(fake.requests[0]) == DEFAULT_SEARCH_PROMPT


async def test_the_setting_and_the_persona_file_replace_it(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    by_setting = make_settings(
        tmp_path,
        personas_dir=persona_file(tmp_path),
        web_search_prompt="Today is {{current_date}}. Cite as [ref_N].",
    )
    fake = script(completion("a"), completion("b"))
    await ask(by_setting, client_for(fake, by_setting))
    assert search_prompt(fake.requests[0]) == "Today is {{current_date}}. Cite as [ref_N]."
    folder = persona_file(tmp_path, "prompt = '''Persona's own {{current_date}} prompt.'''\n")
    by_file = make_settings(tmp_path, personas_dir=folder, web_search_prompt="the setting's")
    await ask(by_file, client_for(fake, by_file))
    assert search_prompt(fake.requests[1]) == "Persona's own {{current_date}} prompt."


def test_a_blank_prompt_is_refused_naming_where(tmp_path: Path) -> None:
    folder = persona_file(tmp_path, 'prompt = "   "\n')
    with pytest.raises(ConfigError, match=r"finder.toml.*web_search.prompt"):
        load_spec(folder / "finder.toml")
    with pytest.raises(ConfigError, match="WEB_SEARCH_PROMPT"):
        Settings.defaults(web_search_prompt="x" * 4001)


async def test_an_answer_without_markers_still_lists_its_sources(tmp_path: Path) -> None:
    async with MockServer(bundled_fixture_paths()) as server:
        settings = Settings.defaults(
            api_key="test-key-0123456789",
            base_url=server.base_url,
            personas_dir=REPO / "personas",
            data_dir=tmp_path,
        )
        async with Runtime(settings) as runtime:
            reply = await runtime.persona("scout").respond("// how tall is the Malahat SkyWalk?")
    assert "[" not in reply.content
    assert [c.url for c in reply.citations] == [
        "https://travel.example.ca/malahat-skywalk",
        "https://news.example.org/skywalk-opens",
    ]
    out = io.StringIO()
    print_reply(reply, out)
    assert "Sources:" in out.getvalue()
    assert "https://news.example.org/skywalk-opens" in out.getvalue()
