"""The real programs of the Discord end-to-end tests: the mock Z.AI and
``generic-framework discord``, each a ``python -m generic_framework`` process writing its whole
output to a log file the test can read (the token must be absent from every line of it)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for _folder in ("service", "telegram", "."):
    if str(TESTS / _folder) not in sys.path:
        sys.path.append(str(TESTS / _folder))

from bot_processes import (  # noqa: E402
    BUNDLED,
    PERSONAS,
    Process,
    base_env,
    mock_process,
    mock_requests,
)
from bot_processes import BotProcess as TelegramBotProcess  # noqa: E402
from fake_discord import FakeDiscord  # noqa: E402

__all__ = [
    "BUNDLED",
    "FIXTURES",
    "PERSONAS",
    "TELEGRAM_FIXTURES",
    "BotProcess",
    "Process",
    "bot_env",
    "mock_process",
    "mock_requests",
]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""This folder's own mock fixtures (an answer that tries to ping everyone)."""
TELEGRAM_FIXTURES = TESTS / "telegram" / "fixtures"
"""The Telegram tests' fixtures (a long answer), asked of the Discord bot too."""


def bot_env(tmp: Path, mock: Process, fake: FakeDiscord, **extra: str) -> dict[str, str]:
    """The environment of a bot process: the mock upstream, the fake Discord, debug logs."""
    return {
        **base_env(tmp),
        "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4",
        "OPENAI_API_KEY": "mock-key",
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp / "data"),
        "LLM_MAX_RETRIES": "0",
        "LOG_LEVEL": "DEBUG",
        "DISCORD_BOT_TOKEN": fake.token,
        "DISCORD_API_URL": fake.api_url,
        "DISCORD_EDIT_INTERVAL": "0.2",
        **extra,
    }


class BotProcess(TelegramBotProcess):
    """``python -m generic_framework discord``: started, waited for (its slash commands are
    registered and its gateway session identified), stopped with SIGTERM."""

    command = "discord"

    def ready(self) -> bool:
        """The slash commands are registered and the gateway session identified."""
        return bool(self.fake.commands) and "identify" in self.fake.gateway_log
