"""The CLI under ``PYTHONDEVMODE=1 -W error::ResourceWarning``: no leak, no warning, exit 0.

Development mode turns on asyncio's debug mode (slow callbacks, never-awaited coroutines) and
shows every ResourceWarning (an unclosed client, socket, file or database); with ``-W error``
a leaked resource would also end as "Exception ignored" on stderr. So stderr must hold exactly
the lines the CLI means to print.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import assert_quiet

from generic_framework.mock import bundled_examples

pytestmark = pytest.mark.e2e

OFFLINE = "offline: no OPENAI_API_KEY set; answering from the embedded mock's recorded fixtures."
QUESTION = "What is the capital of Canada?"


def run_dev_mode(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    dev_env = {k: v for k, v in env.items() if k != "PYTHONWARNINGS"}
    dev_env["PYTHONDEVMODE"] = "1"
    return subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-m", "generic_framework", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=dev_env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_the_question_is_recorded() -> None:
    assert QUESTION in bundled_examples()


def test_one_shot_chat_leaks_nothing(env: dict[str, str], tmp_path: Path) -> None:
    result = run_dev_mode(["chat", QUESTION], env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Ottawa" in result.stdout
    assert assert_quiet(result.stderr).strip() == OFFLINE


def test_interactive_session_switching_personas_leaks_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    switches = ["helper", "scout", "helper", "scout"]
    script = "".join(f"/persona {name}\n" for name in switches) + f"{QUESTION}\n/history\n/quit\n"
    result = run_dev_mode(["chat"], env, cwd=tmp_path, stdin=script)
    assert result.returncode == 0, result.stderr
    assert "Ottawa" in result.stdout
    assert f"user: {QUESTION}" in result.stdout
    lines = assert_quiet(result.stderr).splitlines()
    assert lines[0] == OFFLINE
    assert [line for line in lines if line.startswith("(now talking to")] == [
        f"(now talking to {name})" for name in switches
    ]
    expected = {OFFLINE, "... thinking...", *(f"(now talking to {n})" for n in switches)}
    unexpected = [
        line
        for line in lines[1:]
        if line not in expected and not line.startswith(("scout: ", "Commands: "))
    ]
    assert unexpected == []


def test_interactive_session_ended_by_end_of_input_leaks_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    result = run_dev_mode(["chat", "--persona", "helper"], env, cwd=tmp_path, stdin="/new\n")
    assert result.returncode == 0, result.stderr
    assert_quiet(result.stderr)
    assert "(new conversation " in result.stderr
