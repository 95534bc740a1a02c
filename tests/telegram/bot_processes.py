"""The real programs of the Telegram end-to-end tests: the mock Z.AI, ``generic-framework
telegram`` and ``serve`` with a webhook, each a ``python -m generic_framework`` process.

The mock is started as the service tests start it (tests/service/service_processes.py, put on
``sys.path`` here); the bot talks to the fake Bot API of the test (``fake_bot_api``) through
``TELEGRAM_API_URL``. Every process writes its output to a log file the test can read whole
(the token must be absent from every line of it).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
for _folder in ("service", "."):
    if str(TESTS / _folder) not in sys.path:
        sys.path.append(str(TESTS / _folder))

from service_processes import PERSONAS, Process, base_env, mock_process  # noqa: E402

__all__ = [
    "BUNDLED",
    "FIXTURES",
    "OWNER",
    "PERSONAS",
    "STRANGER",
    "BotProcess",
    "Process",
    "base_env",
    "bot_env",
    "mock_process",
    "mock_requests",
]

BUNDLED = TESTS.parent / "generic_framework" / "mock" / "fixtures"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
"""This folder's own mock fixtures (a long answer, a hostile one)."""
OWNER = 1001
"""The user the tests let in (TELEGRAM_ALLOWED_USERS)."""
STRANGER = 4242


def bot_env(tmp: Path, mock: Process, fake: Any, **extra: str) -> dict[str, str]:
    """The environment of a bot process: the mock upstream, the fake Bot API, debug logs."""
    return {
        **base_env(tmp),
        "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4",
        "OPENAI_API_KEY": "mock-key",
        "PERSONAS_DIR": str(PERSONAS),
        "DATA_DIR": str(tmp / "data"),
        "LLM_MAX_RETRIES": "0",
        "LOG_LEVEL": "DEBUG",
        "TELEGRAM_BOT_TOKEN": fake.token,
        "TELEGRAM_API_URL": fake.base_url,
        "TELEGRAM_ALLOWED_USERS": str(OWNER),
        "TELEGRAM_EDIT_INTERVAL": "0.2",
        **extra,
    }


def mock_requests(mock: Process) -> int:
    """How many requests the mock Z.AI has answered."""
    import httpx

    return int(httpx.get(f"{mock.url}/mock/report", timeout=10).json()["requests"])


class BotProcess:
    """``python -m generic_framework telegram``: started, waited for (it asked the fake Bot API
    to delete any webhook, the last step before it polls), stopped with SIGTERM."""

    command = "telegram"

    def __init__(self, env: dict[str, str], log: Path, fake: Any, args: tuple[str, ...] = ()):
        self.env, self.log, self.fake, self.args = env, log, fake, args
        self.proc: subprocess.Popen[bytes] | None = None

    def ready(self) -> bool:
        """True once the bot has started (a subclass for another platform says when)."""
        return bool(self.fake.calls_to("deleteWebhook"))

    def start(self, timeout: float = 60.0) -> BotProcess:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "generic_framework", self.command, *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=TESTS.parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"the bot did not start:\n{self.text()[-3000:]}")

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def __enter__(self) -> BotProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
