"""Bad input on the command line: one ``error:`` line, the documented exit code, no call upstream.

Each case of the probe that found them (invalid UTF-8, an overlong conversation id, a key in the
endpoint URL, infinite timeouts, an empty persona folder, unusable addresses, words that are
not numbers) runs the CLI as a subprocess. Where an upstream is configured it is a mock that
counts requests: an input refused before the call must leave the count at zero.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support import needs_ipv6_loopback, start_cli, wait_logged_port

from generic_framework.cli.common import explain
from generic_framework.config import Settings
from generic_framework.mock import MockServer
from generic_framework.wire.errors import APIConnectionError

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CANADA = "What is the capital of Canada?"
KEY = "cli-test-key"


def run(
    args: list[str | bytes], env: dict[str, str], stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        input=stdin,
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def one_error_line(done: subprocess.CompletedProcess[bytes]) -> str:
    """The only stderr line, which must start with ``error:``."""
    text = done.stderr.decode()
    assert text.startswith("error: ") and text.count("\n") == 1, text
    assert "Traceback" not in text
    return text.rstrip("\n")


@pytest.fixture
def upstream(env: dict[str, str]) -> Iterator[tuple[MockServer, dict[str, str]]]:
    """A mock that accepts only ``KEY`` and counts requests, and the env pointing at it."""
    with MockServer(api_keys={KEY}) as server:
        yield server, {**env, "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url}


def calls(server: MockServer) -> int:
    return int(server.report()["requests"])


# ------------------------------------------------------------------------------ invalid UTF-8


@pytest.mark.parametrize(
    "locale", [{"PYTHONIOENCODING": "utf-8:strict"}, {"LANG": "C", "LC_ALL": "C"}]
)
def test_a_line_of_invalid_utf8_is_refused_and_the_session_goes_on(
    env: dict[str, str], locale: dict[str, str]
) -> None:
    # Python decodes stdin strictly in a UTF-8 locale such as en_US.UTF-8 (what
    # PYTHONIOENCODING=utf-8:strict reproduces) and escapes bad bytes in the C locale: both
    # must end the same way.
    env = {**env, **locale}
    stdin = f"{CANADA}\n\xff\xfe bad\n{CANADA}\n".encode("latin-1")
    done = run(["chat"], env, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().count("Ottawa") == 2  # the lines around the bad one answered
    errors = [line for line in done.stderr.decode().splitlines() if line.startswith("error")]
    assert errors == [
        "error: line 2 must be UTF-8 text: check the encoding of the terminal or of the input; "
        "it was not sent"
    ]
    assert "Traceback" not in done.stderr.decode()


def test_a_message_of_invalid_utf8_is_a_usage_error_before_any_call(
    upstream: tuple[MockServer, dict[str, str]],
) -> None:
    server, env = upstream
    done = run(["chat", b"\xff\xfe"], env)
    assert done.returncode == 2
    assert one_error_line(done) == (
        "error: invalid value for 'message': must be UTF-8 text: check the encoding of the "
        "terminal or of the input (got '\\udcff\\udcfe')"
    )
    assert calls(server) == 0


def test_a_terminal_that_cannot_show_a_character_gets_a_question_mark(
    env: dict[str, str],
) -> None:
    done = run(["chat", "// what's the weather in Nanaimo?"], {**env, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 0, done.stderr
    assert b"9 ?C" in done.stdout  # the answer's "9 \u00b0C", in an ASCII locale


# ------------------------------------------------------------------------------ identifiers


def test_an_overlong_conversation_id_is_refused_before_the_call(
    upstream: tuple[MockServer, dict[str, str]], tmp_path: Path
) -> None:
    server, env = upstream
    done = run(["chat", "-c", "a" * 300, CANADA], env)
    assert done.returncode == 2
    assert one_error_line(done).startswith(
        "error: invalid value for '--conversation' / '-c': a conversation id must be 1-128 "
        "letters, digits, '_' or '-' (got 300 characters, starting 'aaaa"
    )
    assert calls(server) == 0
    assert not (tmp_path / "data").exists()  # nothing opened, nothing stored


def test_the_longest_valid_conversation_id_is_answered_and_stored(
    upstream: tuple[MockServer, dict[str, str]], tmp_path: Path
) -> None:
    server, env = upstream
    done = run(["chat", "-c", "a" * 128, CANADA], env)
    assert done.returncode == 0, done.stderr
    assert "Ottawa" in done.stdout.decode()
    assert calls(server) == 1
    assert (tmp_path / "data" / "conversations.sqlite3").exists()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["chat", "--model", "glm 4.7", CANADA], "error: invalid value for '--model': must be"),
        (["chat", "-p", "../x", CANADA], "error: invalid value for '--persona' / '-p': a persona"),
        (["chat", "--base-url", "http://[::1", CANADA], "error: invalid value for '--base-url'"),
        (["chat", "-p", "nobody", CANADA], "error: unknown persona 'nobody'; available: helper"),
    ],
)
def test_bad_options_are_refused_before_any_call(
    upstream: tuple[MockServer, dict[str, str]], args: list[str | bytes], line: str
) -> None:
    server, env = upstream
    done = run(args, env)
    assert done.returncode == 2
    assert one_error_line(done).startswith(line)
    assert calls(server) == 0


# ------------------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        ("LLM_TIMEOUT", "inf", "error: LLM_TIMEOUT must be a finite number (got 'inf')"),
        ("LLM_TIMEOUT", "nan", "error: LLM_TIMEOUT must be a finite number (got 'nan')"),
        ("LLM_TEMPERATURE", "abc", "error: LLM_TEMPERATURE must be a number (got 'abc')"),
        (
            "OPENAI_BASE_URL",
            "http://127.0.0.1:9/v4?key=0badc0de0badc0de0badc0de0badc0de",
            "error: OPENAI_BASE_URL must not have a query string or fragment (the API paths are "
            "appended to it): put the key in OPENAI_API_KEY (got 'http://127.0.0.1:9/v4?***')",
        ),
        (
            "OPENAI_BASE_URL",
            "https://user:hunter2-secret@127.0.0.1:9/v4",
            "error: OPENAI_BASE_URL must not hold a user name or password (they would be sent "
            "instead of the API key): put the key in OPENAI_API_KEY "
            "(got 'https://user:***@127.0.0.1:9/v4')",
        ),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(
    env: dict[str, str], variable: str, value: str, line: str
) -> None:
    done = run(["chat", CANADA], {**env, "OPENAI_API_KEY": KEY, variable: value})
    assert done.returncode == 2
    assert one_error_line(done) == line


def test_the_could_not_reach_hint_is_redacted() -> None:
    settings = Settings.defaults(
        base_url="http://127.0.0.1:9/" + "0badc0de" * 4 + ".HintSecretKey001"
    )
    line = explain(APIConnectionError("connection to Z.AI failed"), settings)
    assert (
        line == "error: could not reach http://127.0.0.1:9/***: check OPENAI_BASE_URL "
        "(connection to Z.AI failed)"
    )


@pytest.mark.parametrize(
    "command",
    [["personas"], ["chat", CANADA], ["serve", "--port", "0"], ["serve", "--mock", "--port", "0"]],
)
def test_an_empty_persona_folder_is_the_same_usage_error_everywhere(
    env: dict[str, str], tmp_path: Path, command: list[str | bytes]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run(command, {**env, "PERSONAS_DIR": str(empty)})
    assert done.returncode == 2
    assert one_error_line(done) == (
        f"error: no persona files (*.toml) in {str(empty)!r}: add one, or set PERSONAS_DIR to "
        "a folder of them"
    )


def test_an_empty_personas_dir_variable_means_the_default(env: dict[str, str]) -> None:
    done = run(["personas"], {**env, "PERSONAS_DIR": ""})  # cwd is the project: ./personas
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines()[0].startswith("helper\t")


# ------------------------------------------------------------------------------ servers


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize("command", ["serve", "mock"])
def test_a_taken_port_is_one_line_and_exit_2(
    env: dict[str, str], taken_port: int, command: str
) -> None:
    done = run([command, "--port", str(taken_port)], env, timeout=30)
    assert done.returncode == 2
    assert one_error_line(done) == (
        f"error: cannot listen on 127.0.0.1:{taken_port} (Address already in use): another "
        "program is listening there: choose another port, or stop it"
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["mock", "--latency-ms", "-1"], "error: invalid value for '--latency-ms': "),
        (["mock", "--port", "99999"], "error: invalid value for '--port': must be between 0"),
        (["mock", "--host", "[::1"], "error: invalid value for '--host': is neither an IP"),
        (["serve", "--port", "-1"], "error: invalid value for '--port': must be between 0"),
        (["chat", "--bogus"], "error: no such option: --bogus; see 'generic-framework chat"),
        (["record"], "error: missing argument 'message'"),
    ],
)
def test_usage_errors_are_one_lowercase_error_line(
    env: dict[str, str], args: list[str | bytes], line: str
) -> None:
    done = run(args, env, timeout=30)
    assert done.returncode == 2
    assert one_error_line(done).startswith(line)


@needs_ipv6_loopback
def test_serve_on_a_bracketed_ipv6_loopback(env: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = start_cli(
            ["serve", "--host", "[::1]", "--port", "0"],
            {**env, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        port = wait_logged_port(proc, log, host="[::1]")
        assert port is not None, log.read_text()
        assert httpx.get(f"http://[::1]:{port}/healthz", timeout=30).json() == {"status": "ok"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_record_refuses_an_unwritable_out_before_the_call(
    upstream: tuple[MockServer, dict[str, str]], tmp_path: Path
) -> None:
    server, env = upstream
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    done = run(["record", "--out", str(blocker / "fixture.json"), CANADA], env)
    assert done.returncode == 2
    assert one_error_line(done).startswith(
        f"error: cannot create the folder of --out {str(blocker / 'fixture.json')!r}"
    )
    assert calls(server) == 0
