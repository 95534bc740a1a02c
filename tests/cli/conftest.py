"""Shared by the CLI tests: a clean environment for the CLI subprocess."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The test process's environment without any Z.AI, LLM, bot or web-search setting."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ZAI_", "LLM_", "BOT_", "WEB_SEARCH_"))
    }
    clean.update(
        DATA_DIR=str(tmp_path / "data"),
        PERSONAS_DIR=str(ROOT / "personas"),
        LLM_MAX_RETRIES="0",
        NO_COLOR="1",
    )
    return clean
