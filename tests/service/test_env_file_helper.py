"""``make env KEY=VALUE ...`` (scripts/env.py) edits ``.env`` in place: one line per key,
comments and other keys kept, secrets generated once and never printed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from dotenv import dotenv_values
from dotenv.parser import parse_stream

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / ".env.example"
SCALE_URL = "DATABASE_URL=postgresql://bot:{POSTGRES_PASSWORD}@postgres:5432/bot"

pytestmark = pytest.mark.e2e


def make_env(env_file: Path, *assignments: str) -> subprocess.CompletedProcess[str]:
    """``make env`` as the README runs it, with this interpreter's environment as the venv
    (``-o``: its install marker is not remade)."""
    venv = Path(sys.prefix)
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-o", f"{venv}/.installed", "env", f"VENV={venv}",
         f"ENV_FILE={env_file}", *assignments],
        capture_output=True, text=True, timeout=60, check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")},
    )  # fmt: skip


def keys(path: Path) -> Counter[str]:
    with path.open(encoding="utf-8") as source:
        return Counter(b.key for b in parse_stream(source) if b.key)


def comments(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("#")]


def test_repeated_runs_leave_one_line_per_key_and_keep_everything_else(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    # The old recipe: the example copied, then lines appended (a key twice).
    env_file.write_text(EXAMPLE.read_text() + "BOT_API_TOKEN=appended-before\n")
    args = ("BOT_API_TOKEN=generate", "POSTGRES_PASSWORD=generate", SCALE_URL,
            "LLM_MODEL=glm-4.6", "BOT_ALLOWED_HOSTS=bot,proxy,chat.example.com")  # fmt: skip
    first = make_env(env_file, *args)
    assert first.returncode == 0, first.stderr
    values = dotenv_values(env_file, interpolate=False)
    second = make_env(env_file, *args)
    assert second.returncode == 0, second.stderr
    assert dotenv_values(env_file, interpolate=False) == values

    assert set(keys(env_file).values()) == {1}
    assert set(keys(env_file)) == set(keys(EXAMPLE))
    assert comments(env_file) == comments(EXAMPLE)
    example = dotenv_values(EXAMPLE, interpolate=False)
    changed = {"BOT_API_TOKEN", "POSTGRES_PASSWORD", "DATABASE_URL", "LLM_MODEL",
               "BOT_ALLOWED_HOSTS"}  # fmt: skip
    assert {k: v for k, v in values.items() if k not in changed} == {
        k: v for k, v in example.items() if k not in changed
    }
    assert values["BOT_API_TOKEN"] == "appended-before"  # an existing secret is kept
    password = values["POSTGRES_PASSWORD"] or ""
    assert len(password) == 64 and int(password, 16) >= 0
    assert values["DATABASE_URL"] == f"postgresql://bot:{password}@postgres:5432/bot"
    assert values["LLM_MODEL"] == "glm-4.6"
    assert values["BOT_ALLOWED_HOSTS"] == "bot,proxy,chat.example.com"
    for run in (first, second):
        assert password not in run.stdout + run.stderr
        assert "appended-before" not in run.stdout + run.stderr
    assert "POSTGRES_PASSWORD generated" in first.stdout
    assert "POSTGRES_PASSWORD kept" in second.stdout


def test_a_new_file_is_private_and_regenerate_replaces_a_secret(tmp_path: Path) -> None:
    env_file = tmp_path / "deploy" / ".env"
    env_file.parent.mkdir()
    assert make_env(env_file, "BOT_API_TOKEN=generate").returncode == 0
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    token = dotenv_values(env_file)["BOT_API_TOKEN"]
    again = make_env(env_file, "BOT_API_TOKEN=regenerate", "LLM_TEMPERATURE=0.2")
    assert again.returncode == 0 and "BOT_API_TOKEN generated" in again.stdout
    assert dotenv_values(env_file)["BOT_API_TOKEN"] not in (token, None)
    assert env_file.read_text().splitlines()[1] == "LLM_TEMPERATURE=0.2"
    shown = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "env.py"), "--file", str(env_file),
         "--print", "BOT_API_TOKEN"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert shown.stdout.strip() == dotenv_values(env_file)["BOT_API_TOKEN"]


def test_quoted_values_read_back_the_same(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    # make expands `$`: a literal one is written `$$` on make's command line.
    done = make_env(env_file, "BOT_CORS_ORIGINS=https://a.example https://b.example",
                    "LOG_LEVEL=DEBUG", "OPENAI_API_KEY=key#with$$dollar")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert dotenv_values(env_file) == {
        "BOT_CORS_ORIGINS": "https://a.example https://b.example",
        "LOG_LEVEL": "DEBUG",
        "OPENAI_API_KEY": "key#with$dollar",
    }
    assert "key#with$dollar" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argument", "says"),
    [
        ("DATABASE_URL=postgresql://bot:{POSTGRES_PASSWORD}@db/bot", "has no value in the file"),
        ("BAD-NAME=1", "is not a variable name"),
        ("OPENAI_API_KEY=it's", "is read differently"),
    ],
)
def test_a_refused_argument_changes_nothing(tmp_path: Path, argument: str, says: str) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(EXAMPLE.read_text())
    done = make_env(env_file, "LOG_LEVEL=DEBUG", argument)
    assert done.returncode != 0 and says in done.stderr
    assert env_file.read_text() == EXAMPLE.read_text()


def test_a_value_the_commands_would_refuse_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("LLM_MODEL=glm-4.7\n", encoding="utf-8")
    refused = make_env(env_file, "LLM_TIMEOUT=abc", "BOT_API_TOKEN=generate")
    assert refused.returncode == 2
    assert "LLM_TIMEOUT must be a number (got 'abc'); nothing was written" in refused.stderr
    assert env_file.read_text(encoding="utf-8") == "LLM_MODEL=glm-4.7\n"
    accepted = make_env(env_file, "LLM_TIMEOUT=30")
    assert accepted.returncode == 0, accepted.stderr
    assert dotenv_values(env_file)["LLM_TIMEOUT"] == "30"
