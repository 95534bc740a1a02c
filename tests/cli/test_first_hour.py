"""What a new user trips on in the first hour, as they run it: a real subprocess each time."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import run_cli

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

NO_DRIVER = (
    "error: DATABASE_URL names PostgreSQL but psycopg is not installed: "
    "pip install 'generic-framework[postgres]'"
)


def run(
    args: list[str], env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env, stdin=stdin)


def test_an_unrecorded_question_lists_the_asked_persona_s_own_questions(
    env: dict[str, str],
) -> None:
    result = run(["chat", "-p", "helper", "What time is it?"], env)
    assert result.returncode == 1
    offered = [line.strip() for line in result.stderr.splitlines() if "chat " in line]
    assert "generic-framework chat -p helper 'What is 15% of 80?'" in offered
    assert not [line for line in offered if "Nanaimo" in line or "-p helper" not in line]


def test_the_question_the_bare_prefix_suggests_is_recorded(env: dict[str, str]) -> None:
    hint = run(["chat", "//"], env)
    assert hint.returncode == 0, hint.stderr
    suggested = hint.stdout.split("for example: ")[1].strip()
    answered = run(["chat", suggested], env)
    assert answered.returncode == 0, answered.stderr
    assert "Sources:" in answered.stdout


def test_fault_demos_are_not_offered_as_examples(env: dict[str, str]) -> None:
    result = run(["chat", "Nothing was recorded for this."], env)
    assert result.returncode == 1
    assert "Suggest a name for a grey cat." not in result.stderr
    assert "Write a haiku about the sea." not in result.stderr
    assert "// weather in Nanaimo today" in result.stderr


def test_an_unknown_model_says_which_and_what_to_check(env: dict[str, str]) -> None:
    env["LLM_MODEL"] = "glm-9"
    result = run(["chat", "What is the capital of Canada?"], env)
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert not line.startswith("error: error")
    assert "'glm-9'" in line and "LLM_MODEL" in line


@pytest.fixture
def without_psycopg(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """An environment where psycopg and its pool cannot be imported (as without the extra)."""
    for name in ("psycopg", "psycopg_pool"):
        package = tmp_path / "shadow" / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n"
        )
    env["PYTHONPATH"] = str(tmp_path / "shadow")
    env["DATABASE_URL"] = "postgresql://bot:secret@127.0.0.1:9/bot"
    return env


@pytest.mark.parametrize(
    "args",
    [["chat", "What is the capital of Canada?"], ["serve", "--port", "0"]],
    ids=["chat", "serve"],
)
def test_postgres_without_its_driver_is_one_line_and_exit_2(
    without_psycopg: dict[str, str], args: list[str]
) -> None:
    result = run(args, without_psycopg)
    assert result.returncode == 2, result.stderr
    assert NO_DRIVER in result.stderr.splitlines()
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_interactive_persona_without_a_name_and_an_unknown_command(env: dict[str, str]) -> None:
    result = run(["chat"], env, stdin="/persona\n/bogus\n")
    assert result.returncode == 0, result.stderr
    assert "(talking to scout; personas: helper, scout; switch with /persona NAME)" in (
        result.stderr
    )
    assert "error: unknown command /bogus; the commands are /persona NAME" in result.stderr


def test_the_command_reference_names_every_command(env: dict[str, str]) -> None:
    helped = run(["--help"], env).stdout
    listed = helped.split("Commands:", 1)[1].split("Exit codes", 1)[0]
    commands = [line.split()[0] for line in listed.splitlines() if line.strip()]
    assert "telegram" in commands
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    synopsis = reference.split("```text", 1)[1].split("```", 1)[0]
    assert [c for c in commands if f"generic-framework {c}" not in synopsis] == []


def test_key_ids_are_described_as_they_are() -> None:
    # A key's public id is 12 hex characters (store/users.py), not digits.
    users = (ROOT / "docs" / "users.md").read_text(encoding="utf-8")
    assert "12-digit" not in users and "12 hex characters" in users
