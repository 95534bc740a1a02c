"""The Telegram bot's deployment: the compose service under the `telegram` profile, its start-up
script run under `sh` with a stand-in command (no Docker engine), and .env.example's settings;
the Discord bot's service under the `discord` profile, made from the telegram service."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import Lines

yaml = pytest.importorskip("yaml", reason="PyYAML (a dev dependency) reads docker-compose.yml")

ROOT = Path(__file__).resolve().parents[2]
TELEGRAM_SETTINGS = (
    "TELEGRAM_BOT_TOKEN",
    "TELEGRAM_API_URL",
    "TELEGRAM_ALLOWED_USERS",
    "TELEGRAM_ALLOWED_CHATS",
    "TELEGRAM_WEBHOOK_URL",
    "TELEGRAM_WEBHOOK_SECRET",
    "TELEGRAM_EDIT_INTERVAL",
)
TOKEN = "123456:TEST-token-never-logged"


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return dict(data["services"])


def test_the_telegram_service_is_the_bots_image_settings_and_store(
    services: dict[str, Any],
) -> None:
    bot, telegram = services["bot"], services["telegram"]
    assert telegram["profiles"] == ["telegram"]
    assert telegram["image"] == bot["image"] and telegram["pull_policy"] == "never"
    assert telegram["env_file"] == bot["env_file"]
    # The same store: the bot's volume (SQLite) or DATABASE_URL from the same .env.
    assert (
        telegram["volumes"] == bot["volumes"] == ["bot-data:/data", "./personas:/app/personas:ro"]
    )
    for name in ("DATA_DIR", "PERSONAS_DIR", "MOCK_ZAI_URL"):
        assert telegram["environment"][name] == bot["environment"][name]
    assert "BOT_API_TOKEN" not in telegram["environment"]  # it serves no HTTP
    for name in ("mock-zai", "postgres"):
        assert telegram["depends_on"][name] == bot["depends_on"][name]
    # A poller listens on nothing: no port, and the image's /healthz check is off.
    assert "ports" not in telegram and "expose" not in telegram
    assert telegram["healthcheck"] == {"disable": True}
    assert telegram["restart"] == "unless-stopped" and telegram["read_only"] is True
    assert telegram["cap_drop"] == ["ALL"] and "deploy" not in telegram
    # No ${TELEGRAM_BOT_TOKEN:?}: compose interpolates every service, whatever the profile.
    text = (ROOT / "docker-compose.yml").read_text()
    assert "${TELEGRAM_BOT_TOKEN:?" not in text
    assert "docker compose --profile telegram up -d" in text


def _script(services: dict[str, Any], service: str = "telegram") -> str:
    command = services[service]["command"]
    assert command[:2] == ["sh", "-c"]
    script = str(command[2]).replace("$$", "$")  # compose turns $$ into $
    assert f"generic-framework {service} &" in script
    return script


def _stand_in(folder: Path) -> Path:
    """A ``generic-framework`` that records its arguments and upstream, then does FAKE_MODE:
    ``exit-N``, or ``run`` until SIGTERM (then exits 0, noting it). Its SIGTERM handler is in
    place before it records anything: a test signals it once the record is there."""
    folder.mkdir(parents=True)
    program = folder / "generic-framework"
    program.write_text(
        f"#!{sys.executable}\n"
        "import os, signal, sys, time, pathlib\n"
        "out = pathlib.Path(os.environ['FAKE_OUT'])\n"
        "def stop(*_):\n"
        "    with out.open('a') as f:\n"
        "        f.write('stopped\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "out.write_text(' '.join(sys.argv[1:]) + '\\n' + os.environ.get('OPENAI_BASE_URL', '')"
        " + ' ' + os.environ.get('OPENAI_API_KEY', '') + '\\n')\n"
        "mode = os.environ['FAKE_MODE']\n"
        "if mode.startswith('exit-'):\n"
        "    sys.exit(int(mode[5:]))\n"
        "while True:\n"
        "    time.sleep(0.05)\n"
    )
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return folder


STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    """Whatever a test leaves running (the shell, the stand-in it started) is killed after it."""
    yield
    for proc in STARTED:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    STARTED.clear()


def _start(
    services: dict[str, Any],
    tmp_path: Path,
    mode: str,
    env: dict[str, str],
    service: str = "telegram",
) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "ran.txt"
    base = {
        "PATH": f"{_stand_in(tmp_path / 'bin')}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "MOCK_ZAI_URL": services["telegram"]["environment"]["MOCK_ZAI_URL"],
        "OPENAI_BASE_URL": "https://api.z.ai/api/paas/v4",
        "FAKE_MODE": mode,
        "FAKE_OUT": str(out),
    }
    proc = subprocess.Popen(
        ["sh", "-c", _script(services, service)],
        env={**base, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    STARTED.append(proc)
    return proc, out


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=30)


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + 20
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path.name} never written"
        time.sleep(0.05)
    return path.read_text()


# DATABASE_URL in .env without the scale profile up: its host is not running (no such name).
NO_DATABASE = "postgresql://bot:pw-7a1@postgres.invalid:5432/bot"

# The host has no `mock-zai`; a local name stands for a running mock.
RUNNING_MOCK = "http://localhost:8090/api/paas/v4"


def test_the_bot_runs_with_the_key_or_the_mock_and_stops_when_told(
    services: dict[str, Any], tmp_path: Path
) -> None:
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "real"}
    proc, out = _start(services, tmp_path / "key", "run", env)
    try:
        assert _wait_for(out) == "telegram\nhttps://api.z.ai/api/paas/v4 real\n"
        assert proc.poll() is None
    finally:
        _, stderr = _stop(proc)
    # The stop signal reached the command, which finished; its exit code is the script's.
    assert proc.returncode == 0, stderr
    assert out.read_text().endswith("stopped\n")

    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "MOCK_ZAI_URL": RUNNING_MOCK}
    proc, out = _start(services, tmp_path / "mock", "exit-0", env)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert out.read_text() == f"telegram\n{RUNNING_MOCK} mock-key\n"
    assert f"no OPENAI_API_KEY: using the mock Z.AI server at {RUNNING_MOCK}" in stderr
    assert TOKEN not in stdout + stderr


def test_a_crash_exits_for_the_restart_policy(services: dict[str, Any], tmp_path: Path) -> None:
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "real"}
    proc, _ = _start(services, tmp_path, "exit-1", env)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "configuration error" not in stderr


@pytest.mark.parametrize(
    ("mode", "env", "says"),
    [
        ("run", {"OPENAI_API_KEY": "real"}, "error: TELEGRAM_BOT_TOKEN is not set"),
        ("run", {"OPENAI_API_KEY": "real"}, "error: DISCORD_BOT_TOKEN is not set"),
        ("run", {"TELEGRAM_BOT_TOKEN": TOKEN}, "start the mock with: docker compose --profile"),
        ("exit-2", {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "real"}, ""),
        (
            "run",
            {"TELEGRAM_BOT_TOKEN": TOKEN, "OPENAI_API_KEY": "real", "DATABASE_URL": NO_DATABASE},
            "docker compose --profile scale --profile telegram up -d",
        ),
    ],
    ids=["no-token", "discord-no-token", "no-key-no-mock", "command-refused", "database-not-up"],
)
def test_a_configuration_error_waits_to_be_stopped_instead_of_restarting(
    services: dict[str, Any], tmp_path: Path, mode: str, env: dict[str, str], says: str
) -> None:
    # Exit 2 (a setting, or another process polling the same bot) would fail again at once,
    # and a restarted poller would cut the other one off each time: the container waits.
    service = "discord" if "DISCORD" in says else "telegram"
    proc, out = _start(services, tmp_path, mode, env, service)
    err = Lines(proc.stderr)
    try:
        err.wait("configuration error: not exiting until stopped")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        with proc.stdout:
            stdout = proc.stdout.read()
        proc.wait(timeout=30)
    stderr = err.text()
    assert proc.returncode == 2 and stdout == ""
    assert says in stderr
    assert "configuration error: not exiting until stopped" in stderr
    assert out.exists() == (mode == "exit-2")  # checked before the command runs
    assert TOKEN not in stderr and "pw-7a1" not in stderr


def _example() -> dict[str, str]:
    text = (ROOT / ".env.example").read_text()
    return dict(re.findall(r"^([A-Z][A-Z0-9_]+)=(.*)$", text, re.M))


def test_env_example_lists_every_telegram_setting_closed_by_default() -> None:
    values = _example()
    assert {k: values.get(k) for k in TELEGRAM_SETTINGS} == {
        "TELEGRAM_BOT_TOKEN": "",
        "TELEGRAM_API_URL": "https://api.telegram.org",
        "TELEGRAM_ALLOWED_USERS": "",
        "TELEGRAM_ALLOWED_CHATS": "",
        "TELEGRAM_WEBHOOK_URL": "",
        "TELEGRAM_WEBHOOK_SECRET": "",
        "TELEGRAM_EDIT_INTERVAL": "1.5",
    }
    lines = (ROOT / ".env.example").read_text().splitlines()
    text = " ".join(line.removeprefix("#").strip() for line in lines)
    assert "Closed by default: empty lets nobody in" in text
    assert "a short reply with their own user id and how to be let in" in text
    assert "/telegram/webhook" in text and "telegram:<id>" in text


def test_the_readme_walks_from_botfather_to_a_running_bot() -> None:
    page = (ROOT / "docs" / "chat-platforms.md").read_text()
    section = page.split("\n## Telegram\n", 1)[1].split("\n## ", 1)[0]
    for needed in ("/newbot", "make env TELEGRAM_BOT_TOKEN", "TELEGRAM_ALLOWED_USERS",
                   "generic-framework telegram", "docker compose --profile telegram up -d",
                   "/start", "/help", "/new", "/persona", "/usage", "//", "privacy mode",
                   "TELEGRAM_WEBHOOK_URL", "TELEGRAM_WEBHOOK_SECRET", "/telegram/webhook",
                   "generic_framework_telegram_updates_total"):  # fmt: skip
        assert needed in section, needed


def test_the_discord_service_is_the_telegram_service_with_its_own_profile_and_command(
    services: dict[str, Any], tmp_path: Path
) -> None:
    telegram, discord = services["telegram"], services["discord"]
    assert discord["profiles"] == ["discord"]
    for key in ("image", "env_file", "environment", "volumes", "read_only", "cap_drop"):
        assert discord[key] == telegram[key], key
    env = {"DISCORD_BOT_TOKEN": "a.b.c", "OPENAI_API_KEY": "real"}
    proc, out = _start(services, tmp_path / "key", "run", env, "discord")
    try:
        assert _wait_for(out) == "discord\nhttps://api.z.ai/api/paas/v4 real\n"
    finally:
        _, stderr = _stop(proc)
    assert proc.returncode == 0, stderr
    assert out.read_text().endswith("stopped\n")
