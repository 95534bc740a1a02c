"""``.env.example`` and the configuration reference (docs/configuration.md) name the same
variables, and every variable the code reads is in both."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices, BaseModel

from generic_framework.chats.discord.settings import DiscordSettings
from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.config import Settings

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def example_names() -> set[str]:
    """The variables ``.env.example`` sets or shows commented out (``# NAME=value``)."""
    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    return set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]+)=", text, re.MULTILINE))


def reference_names() -> set[str]:
    """The variables in the first column of the reference's tables (aliases left out)."""
    names: set[str] = set()
    for line in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1].split("(alias")[0]
            names.update(NAME.findall(first))
    return names


def read_names(model: type[BaseModel]) -> set[str]:
    """The environment variables a settings model reads (the first alias of an aliased one)."""
    names = set()
    for field, info in model.model_fields.items():
        alias = info.validation_alias
        names.add(str(alias.choices[0]) if isinstance(alias, AliasChoices) else field.upper())
    return names


def test_the_reference_and_the_example_name_the_same_variables() -> None:
    example, reference = example_names(), reference_names()
    assert sorted(example - reference) == [], "in .env.example only"
    assert sorted(reference - example) == [], "in docs/configuration.md only"


def test_every_variable_the_code_reads_is_documented() -> None:
    read = read_names(Settings) | read_names(TelegramSettings) | read_names(DiscordSettings)
    assert sorted(read - example_names()) == []
    assert sorted(read - reference_names()) == []
