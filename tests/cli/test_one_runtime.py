"""A one-shot ``chat`` builds one Runtime and reads the persona files once (in-process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

from generic_framework.cli.chat import ChatOptions, run_chat
from generic_framework.core import loader
from generic_framework.runtime import Runtime


def test_a_one_shot_chat_builds_one_runtime_and_reads_the_personas_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ZAI_", "LLM_", "BOT_", "WEB_SEARCH_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PERSONAS_DIR", str(ROOT / "personas"))
    monkeypatch.chdir(tmp_path)  # no .env of the checkout
    built: list[Runtime] = []
    read: list[Path] = []
    init, load = Runtime.__init__, loader.load_specs

    def counting_init(self: Runtime, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    def counting_load(directory: Path) -> Any:
        read.append(directory)
        return load(directory)

    monkeypatch.setattr(Runtime, "__init__", counting_init)
    monkeypatch.setattr(loader, "load_specs", counting_load)
    code = run_chat(ChatOptions(message="What is the capital of Canada?", mock=True))
    assert code == 0 and "Ottawa" in capsys.readouterr().out
    assert len(built) == 1 and built[0].closed
    assert read == [ROOT / "personas"]


def test_an_unknown_persona_is_refused_before_any_runtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PERSONAS_DIR", str(ROOT / "personas"))
    monkeypatch.chdir(tmp_path)
    built: list[object] = []
    monkeypatch.setattr(Runtime, "__init__", lambda self, *a, **k: built.append(self))
    assert run_chat(ChatOptions(message="hi", persona="nobody", mock=True)) == 2
    assert "unknown persona 'nobody'" in capsys.readouterr().err and built == []
