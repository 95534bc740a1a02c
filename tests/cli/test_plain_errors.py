"""Errors a new user meets name the option at fault, in plain words; an empty history says so.

Each case runs the CLI as a subprocess and checks its exit code and its one ``error:`` line.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from support import run_cli

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env, stdin=stdin)


def test_history_of_an_empty_conversation_says_there_is_nothing_yet(env: dict[str, str]) -> None:
    done = cli(env, "chat", "--conversation", "fresh-one", stdin="/history\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "(nothing yet: conversation fresh-one has no messages)" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--since", "yesterday"],
            "error: invalid value for '--since': must be a day like 2026-11-01 (got 'yesterday')",
        ),
        (
            ["--since", "2026-13-01"],
            "error: invalid value for '--since': must be a day like 2026-11-01 (got '2026-13-01')",
        ),
        (
            ["--by", "week"],
            "error: invalid value for '--by': must be one of persona, model, day, user "
            "(got 'week')",
        ),
    ],
)
def test_usage_errors_name_the_option_in_plain_words(
    env: dict[str, str], args: list[str], line: str
) -> None:
    done = cli(env, "usage", *args)
    assert done.returncode == 2
    assert done.stderr == line + "\n"


def test_usage_by_day_since_a_day_still_works(env: dict[str, str]) -> None:
    done = cli(env, "usage", "--by", "day", "--since", "2026-01-01")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("day ")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("side", ["--from", "--to"])
def test_db_copy_blames_the_option_of_the_database_that_is_down(
    env: dict[str, str], tmp_path: Path, side: str
) -> None:
    down = f"postgresql://bot:pw-0badc0de@127.0.0.1:{_closed_port()}/bot"
    local = str(tmp_path / "local.sqlite3")
    source, target = (down, local) if side == "--from" else (local, down)
    done = cli(env, "db", "copy", "--from", source, "--to", target)
    assert done.returncode == 1
    line = done.stderr.strip()
    assert line.startswith(f"error: the database of {side} postgresql://bot:***@127.0.0.1:")
    assert line.endswith(f"check {side} and that PostgreSQL is running")
    assert "DATABASE_URL" not in line and "pw-0badc0de" not in line


def test_db_copy_names_the_option_of_a_url_that_is_no_database(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = cli(env, "db", "copy", "--from", str(tmp_path / "a"), "--to", "mysql://u:pw@h/db")
    assert done.returncode == 2
    assert done.stderr == (
        "error: --to: a database URL is postgresql://..., sqlite:///PATH or a file path "
        "(got 'mysql://u:***@h/db')\n"
    )
