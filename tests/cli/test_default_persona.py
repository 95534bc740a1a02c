"""One rule picks the persona when none is named: the CLI, the runtime and the service agree.

``BOT_DEFAULT_PERSONA``, else the first persona by name whose web search is on, else the first
(:func:`~generic_framework.runtime.default_persona`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import run_cli

from generic_framework.config import Settings
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime, default_persona
from generic_framework.service import app as service_app

ROOT = Path(__file__).resolve().parents[2]


def chat(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_cli(["chat", *args], env, stdin=stdin)


def write_persona(folder: Path, name: str, search: str | None) -> None:
    section = f'\n[web_search]\nmode = "{search}"\n' if search else ""
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\ndescription = "d"\nsystem_prompt = "p"\n{section}'
    )


@pytest.mark.parametrize(
    ("variable", "banner"), [(None, "scout: "), ("helper", "helper: "), ("scout", "scout: ")]
)
def test_interactive_chat_starts_with_the_default_persona(
    env: dict[str, str], variable: str | None, banner: str
) -> None:
    chosen = {"BOT_DEFAULT_PERSONA": variable} if variable else {}
    done = chat({**env, **chosen}, stdin="/quit\n")
    assert done.returncode == 0, done.stderr
    assert any(line.startswith(banner) for line in done.stderr.splitlines()), done.stderr


def test_chat_refuses_a_default_persona_that_does_not_exist(env: dict[str, str]) -> None:
    done = chat({**env, "BOT_DEFAULT_PERSONA": "nobody"}, "hello")
    assert done.returncode == 2
    assert done.stderr == (
        "error: BOT_DEFAULT_PERSONA 'nobody' is not a persona (known: helper, scout)\n"
    )


def test_the_runtime_and_the_service_use_the_same_rule(tmp_path: Path) -> None:
    write_persona(tmp_path, "alpha", "off")
    write_persona(tmp_path, "beta", None)  # WEB_SEARCH_MODE decides
    write_persona(tmp_path, "gamma", "builtin")
    settings = Settings.defaults(personas_dir=tmp_path)
    runtime = Runtime(settings)
    assert runtime.spec().name == "beta"
    assert default_persona(settings, runtime.specs()) == "beta"
    assert service_app.default_persona is default_persona
    no_search = Settings.defaults(personas_dir=tmp_path, web_search_mode="off")
    assert Runtime(no_search).spec().name == "gamma"
    chosen = Settings.defaults(personas_dir=tmp_path, bot_default_persona="alpha")
    assert Runtime(chosen).spec().name == "alpha"


def test_a_default_persona_that_does_not_exist_is_refused_by_the_runtime(tmp_path: Path) -> None:
    write_persona(tmp_path, "alpha", None)
    settings = Settings.defaults(personas_dir=tmp_path, bot_default_persona="nobody")
    with pytest.raises(ConfigError, match=r"'nobody' is not a persona \(known: alpha\)"):
        Runtime(settings).spec()
    assert Runtime(settings).spec("alpha").name == "alpha"  # a named persona still works
