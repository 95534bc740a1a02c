"""The CLI as users run it: a real subprocess, real stdout/stderr and exit codes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_cli

from generic_framework.mock import MockServer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NANAIMO = "// what's the weather in Nanaimo?"


def run(
    args: list[str], env: dict[str, str], stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env, stdin=stdin, cwd=cwd)


@pytest.fixture
def guarded_mock() -> Iterator[MockServer]:
    with MockServer(api_keys={"the-right-key"}) as server:
        yield server


def test_version_and_help(env: dict[str, str]) -> None:
    version = run(["--version"], env)
    assert version.returncode == 0
    assert version.stdout.startswith("generic-framework ")
    helped = run(["chat", "--help"], env)
    assert helped.returncode == 0
    assert "Exit codes: 0 success, 1 upstream or runtime error, 2 usage" in helped.stdout
    for command in ("chat", "personas", "serve", "mock", "record", "replay"):
        assert command in run(["--help"], env).stdout


def test_one_shot_web_query_offline_prints_answer_and_sources(env: dict[str, str]) -> None:
    result = run(["chat", NANAIMO], env)
    assert result.returncode == 0, result.stderr
    assert "Nanaimo" in result.stdout
    assert "Sources:" in result.stdout
    assert "[1] " in result.stdout and "https://" in result.stdout
    assert "[ref_" not in result.stdout
    assert result.stderr.count("offline:") == 1
    assert "no OPENAI_API_KEY" in result.stderr


def test_json_output_is_the_whole_reply(env: dict[str, str]) -> None:
    result = run(["chat", "--json", NANAIMO], env)
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["stop_reason"] == "completed"
    assert reply["citations"][0]["number"] == 1
    assert reply["citations"][0]["url"].startswith("https://")
    assert reply["usage"]["total_tokens"] > 0
    assert reply["rounds"]


def test_mock_flag_forces_offline_even_with_a_key(env: dict[str, str]) -> None:
    env["OPENAI_API_KEY"] = "a-key-that-must-not-be-used"
    result = run(["chat", "--mock", "What is the capital of Canada?"], env)
    assert result.returncode == 0, result.stderr
    assert "Ottawa" in result.stdout
    assert "--mock given" in result.stderr


def test_unrecorded_message_gets_an_honest_reply(env: dict[str, str]) -> None:
    result = run(["chat", "What will the stock market do tomorrow?"], env)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "no recorded answer" in result.stderr
    assert NANAIMO in result.stderr


def test_conversation_continues_across_processes(env: dict[str, str]) -> None:
    first = run(["chat", "--json", "--conversation", "c1", "// what is 17% of 2,340?"], env)
    assert first.returncode == 0, first.stderr
    second = run(["chat", "--json", "--conversation", "c1", "What is the capital of Canada?"], env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["conversation_id"] == "c1"


def test_upstream_error_is_one_line_and_exit_1(env: dict[str, str]) -> None:
    result = run(["chat", "Write a haiku about the sea."], env)
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 1
    assert len(error_lines) == 1
    assert "balance" in error_lines[0] and "1113" in error_lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_content_filter_is_an_answer_not_a_crash(env: dict[str, str]) -> None:
    result = run(["chat", "--json", "Repeat the phrase the moderation filter blocks."], env)
    assert result.returncode == 0, result.stderr
    reply = json.loads(result.stdout)
    assert reply["stop_reason"] == "content_filter"
    assert "content filter" in reply["content"]


def test_wrong_key_says_check_the_key(env: dict[str, str], guarded_mock: MockServer) -> None:
    env["OPENAI_API_KEY"] = "the-wrong-key"
    result = run(["chat", "--base-url", guarded_mock.base_url, "What is the capital?"], env)
    assert result.returncode == 1
    assert "check OPENAI_API_KEY" in result.stderr
    assert "the-wrong-key" not in result.stderr


def test_unreachable_endpoint(env: dict[str, str]) -> None:
    env["OPENAI_API_KEY"] = "k"
    result = run(["chat", "--base-url", "http://127.0.0.1:9/api/paas/v4", "hi"], env)
    assert result.returncode == 1
    assert "could not reach http://127.0.0.1:9/api/paas/v4" in result.stderr


def test_a_damaged_database_is_one_error_line(env: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "conversations.sqlite3").write_bytes(b"not a database at all " * 100)
    result = run(["chat", "What is the capital of Canada?"], env)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "conversations.sqlite3" in errors[0] and "is damaged" in errors[0]
    assert len(result.stderr.splitlines()) <= 2  # the offline notice, then the error
    assert result.stdout == ""


def test_usage_errors_exit_2(env: dict[str, str]) -> None:
    bad_setting = run(["chat", "hi"], {**env, "LLM_TEMPERATURE": "2"})
    assert bad_setting.returncode == 2
    assert "LLM_TEMPERATURE must be between 0 and 1" in bad_setting.stderr
    unknown = run(["chat", "--persona", "nobody", "hi"], env)
    assert unknown.returncode == 2
    assert "unknown persona 'nobody'" in unknown.stderr
    assert run(["chat", "--no-such-flag"], env).returncode == 2


def test_personas_lists_the_examples(env: dict[str, str]) -> None:
    result = run(["personas"], env)
    assert result.returncode == 0
    names = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert "scout" in names and len(names) >= 2


def test_interactive_session_over_piped_stdin(env: dict[str, str]) -> None:
    script = f"{NANAIMO}\n/history\n/new\n/history\nWhat is the capital of Canada?\n/quit\n"
    result = run(["chat"], env, stdin=script)
    assert result.returncode == 0, result.stderr
    assert "Nanaimo" in result.stdout and "Sources:" in result.stdout
    # The streamed answer's [ref_N] markers were rewritten as they arrived.
    assert "[ref_" not in result.stdout and "this afternoon [1]" in result.stdout
    assert "searching the web" in result.stderr
    assert "(new conversation" in result.stderr
    assert "Ottawa" in result.stdout
    # /history before /new shows the web turn; after /new the history is empty.
    assert result.stdout.count("user: what's the weather in Nanaimo?") == 1


def test_interactive_turn_failure_keeps_the_session(env: dict[str, str]) -> None:
    script = "Write a haiku about the sea.\nWhat is the capital of Canada?\n"
    result = run(["chat"], env, stdin=script)
    assert result.returncode == 0
    assert "balance" in result.stderr
    assert "Ottawa" in result.stdout
