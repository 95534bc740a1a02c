"""Persona files: the shipped examples load, and every mistake names file, field and problem."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from generic_framework.config import Settings
from generic_framework.core.loader import load_persona, load_personas
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime

PERSONAS = Path(__file__).resolve().parents[2] / "personas"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_personas_load() -> None:
    personas = load_personas(PERSONAS, settings=Settings.defaults())
    assert set(personas) >= {"scout", "helper"}
    scout = personas["scout"]
    assert "//" in scout.spec.description and scout.spec.web_search.mode == "builtin"
    assert [t.name for t in scout.tools] == ["current_time", "calculate", "convert_units"]
    helper = personas["helper"]
    assert helper.spec.tools_always and helper.spec.web_search.mode == "off"


def test_every_field(tmp_path: Path) -> None:
    module = tmp_path / "my_tools_for_test.py"
    module.write_text(
        "from generic_framework.tools import tool\n\n"
        "@tool\ndef shout(text: str) -> str:\n    '''Shout.'''\n    return text.upper()\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        path = write(
            tmp_path,
            "full.toml",
            """
name = "full-persona"
description = "All fields."
system_prompt = "Be thorough."
model = "glm-4.5"
temperature = 0.4
thinking = "disabled"
max_tool_rounds = 2
tools = ["shout", "calculate"]
tool_modules = ["my_tools_for_test"]
tools_always = true
final_answer_fallback = "Nothing."

[web_search]
mode = "client"
engine = "search_std"
count = 9
recency = "oneMonth"
domain_filter = "example.org"
content_size = "high"
""",
        )
        persona = load_persona(path, settings=Settings.defaults())
    finally:
        sys.path.remove(str(tmp_path))
    assert persona.spec.name == "full-persona" and persona.spec.model == "glm-4.5"
    assert persona.spec.temperature == 0.4 and persona.spec.thinking is not None
    assert persona.spec.max_tool_rounds == 2 and persona.spec.tools_always
    assert [t.name for t in persona.tools] == ["shout", "calculate"]
    assert persona.spec.final_answer_fallback == "Nothing."
    ws = persona.spec.web_search
    assert (ws.mode, ws.engine, ws.count, ws.recency, ws.domain_filter, ws.content_size) == (
        "client", "search_std", 9, "oneMonth", "example.org", "high",
    )  # fmt: skip


def test_name_defaults_to_the_file_name(tmp_path: Path) -> None:
    persona = load_persona(write(tmp_path, "plain.toml", 'system_prompt = "Hi."'))
    assert persona.spec.name == "plain" and persona.tools == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('system_prompt = "x"\ntemprature = 0.5', "temprature: unknown key"),
        ("name = 'n'", "system_prompt: is required"),
        ('system_prompt = "x"\ntemperature = 3', "temperature: Input should be less than"),
        ('system_prompt = "x"\nthinking = "maybe"', "thinking: must be 'enabled' or 'disabled'"),
        ('system_prompt = "x"\nmax_tool_rounds = -1', "max_tool_rounds: Input should be greater"),
        ('system_prompt = "x"\ntools = ["teleport"]', "tools[0]: unknown tool 'teleport'"),
        ('system_prompt = "x"\ntools = "calculate"', "tools: Input should be a valid tuple"),
        ('system_prompt = "x"\ntool_modules = ["no_such_module_xyz"]', "tool_modules[0]: cannot"),
        ('system_prompt = "x"\ntool_modules = ["json"]', "defines no @tool functions"),
        ('system_prompt = "x"\n[web_search]\nmode = "always"', "web_search.mode: Input should"),
        ('system_prompt = "x"\n[web_search]\ncount = 0', "web_search.count: Input should be"),
        ('system_prompt = "x"\n[web_search]\nrecent = "oneDay"', "web_search.recent: unknown key"),
        ('name = "has space"\nsystem_prompt = "x"', "name: a persona name must be 1-64"),
        ('system_prompt = "x"\ntemperature = nan', "temperature: must be a finite number"),
        ('system_prompt = "x"\ntemperature = "warm"', "temperature: must be a number"),
        ('system_prompt = "x"\nmodel = ""', "model: must be 1-128 printable ASCII"),
        ('system_prompt = "x"\nmodel = "glm 4"', "model: must be 1-128 printable ASCII"),
        ('system_prompt = "x"\ntools = ' + "[" * 3000 + "]" * 3000, "nested too deeply"),
        ('system_prompt = "x', "not valid TOML"),
    ],
)
def test_errors_name_file_field_and_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(ConfigError) as caught:
        load_persona(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="persona file not found"):
        load_persona(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="PERSONAS_DIR"):
        load_personas(tmp_path / "nowhere")


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'name = "same"\nsystem_prompt = "x"')
    write(tmp_path, "b.toml", 'name = "same"\nsystem_prompt = "y"')
    with pytest.raises(ConfigError, match=r"b\.toml: name: 'same' is already used by .*a\.toml"):
        load_personas(tmp_path)


async def test_personas_share_the_given_runtime(tmp_path: Path) -> None:
    from generic_framework.store import SQLiteStore
    from generic_framework.wire.client import GLMClient

    write(tmp_path, "a.toml", 'system_prompt = "x"')
    write(tmp_path, "b.toml", 'system_prompt = "y"')
    settings = Settings.defaults()
    client = GLMClient(settings)
    store = SQLiteStore(tmp_path / "db.sqlite3")
    runtime = Runtime(settings, client=client, store=store)
    personas = load_personas(tmp_path, runtime=runtime)
    assert all(p.runtime is runtime for p in personas.values())
    assert runtime.client is client and runtime.store is store
    for persona in personas.values():
        await persona.aclose()  # a shared runtime stays open
    await runtime.aclose()  # and closing it leaves the borrowed client and store open
    assert not client._http.is_closed
    await client.aclose()
    await store.aclose()
