"""Secrets from files (``NAME_FILE``), as Swarm and Kubernetes mount them: read for secret
fields only, one trailing newline dropped, never both the variable and its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from generic_framework.chats.telegram.settings import TelegramSettings
from generic_framework.config import Settings
from generic_framework.errors import ConfigError


def test_a_secret_is_read_from_the_file_its_variable_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = tmp_path / "database_url"
    url.write_text("postgresql://bot:pw-from-file@postgres:5432/bot\n")
    token = tmp_path / "token"
    token.write_text("tok-from-file")
    monkeypatch.setenv("DATABASE_URL_FILE", str(url))
    monkeypatch.setenv("BOT_API_TOKEN_FILE", str(token))
    monkeypatch.setenv("ZAI_API_KEY_FILE", str(token))
    settings = Settings()
    assert settings.database_url is not None
    assert (
        settings.database_url.get_secret_value()
        == "postgresql://bot:pw-from-file@postgres:5432/bot"
    )
    assert settings.bot_api_token is not None
    assert settings.bot_api_token.get_secret_value() == "tok-from-file"
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "tok-from-file"


def test_the_telegram_token_comes_from_a_file_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "telegram"
    token.write_text("123456:ABC-secret_token\n")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN_FILE", str(token))
    assert TelegramSettings().token == "123456:ABC-secret_token"


def test_only_secrets_are_read_from_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.write_text("glm-4.6")
    monkeypatch.setenv("LLM_MODEL_FILE", str(model))
    assert Settings().llm_model == "glm-4.7"


def test_a_variable_and_its_file_together_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    monkeypatch.setenv("BOT_API_TOKEN", "two")
    monkeypatch.setenv("BOT_API_TOKEN_FILE", str(token))
    with pytest.raises(ConfigError, match="both BOT_API_TOKEN and BOT_API_TOKEN_FILE"):
        Settings()


def test_a_missing_file_is_a_clear_error_without_its_content(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL_FILE", str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="DATABASE_URL_FILE: cannot read"):
        Settings()
