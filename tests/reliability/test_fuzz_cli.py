"""Property: no command line, standard input or setting makes the CLI print a traceback.

Hypothesis runs ``python -m generic_framework`` as a subprocess on generated argv (bytes, so
not-UTF-8 arguments are included), stdin bytes and up to two generated environment variables.
Every run must end with exit code 0, 1 or 2, without a traceback, without the ``internal
error`` line the entry point prints for an unhandled exception, and with an ``error:`` line
when it fails; ``serve`` and ``mock`` may instead still be serving when the time is up, having
said so. A failure prints the argv, stdin and environment that caused it.

No API key is ever set, so every answer comes from the embedded mock: nothing leaves the
machine. Path arguments never contain ``/`` (``mock --fixtures /`` would read the whole disk),
and the process runs in an empty folder two levels below the test's temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

EXAMPLES = 60
"""20-40 s: each example is one CLI process (0.2-1 s; 4 s when a server starts)."""
PROCESS_SECONDS = 6
"""What one example may take with both cores busy (a process start is several times slower
then): the test's time limit is this times the examples, not the suite's 120 s, which 68
process starts outgrow on a busy machine."""

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout((EXAMPLES + 8) * PROCESS_SECONDS),  # the 8 explicit examples too
]

REPO = Path(__file__).resolve().parents[2]
SERVING = "Uvicorn running on"
"""What a server command prints once it serves (its address follows)."""

OPTIONS = {
    b"chat": [b"--persona", b"-p", b"--conversation", b"-c", b"--json", b"--mock",
              b"--base-url", b"--model"],
    b"personas": [b"--dir"],
    b"serve": [b"--host", b"--port"],
    b"mock": [b"--fixtures", b"--host", b"--port", b"--latency-ms", b"--fail-rate",
              b"--fail-seed"],
    b"record": [b"--out", b"-o", b"--persona"],
    b"replay": [b"--json"],
}  # fmt: skip
INTERESTING = [
    b"", b" ", b"-", b"--", b"//", b"// hi", b"\xff\xfe", b"a" * 300, b"a" * 128, b"..",
    b"[::1]", b"0", b"-1", b"99999", b"abc", b"nan", b"inf", b"1e400", b"0.5", b"http://[::1",
    b"http://u:p@h/", b"../x", b"\xc3\xa9t\xc3\xa9", b"glm 4", b"%s", b"{x}", b"\x1b[31m",
    b"a\nb", b"--help", b"\xed\xa0\x80",
]  # fmt: skip
TOKENS = st.one_of(
    st.sampled_from(INTERESTING),
    st.binary(max_size=12).filter(lambda b: b"\x00" not in b and b"/" not in b),
)
# What a user would type, so that valid paths (answers, sessions) are explored as well.
QUESTIONS = st.sampled_from(
    [b"What is the capital of Canada?", b"// what's the weather in Nanaimo?", b"hello", b"/new",
     b"/history", b"/persona helper", b"/persona \xff", b"/help", b"/quit"]
)  # fmt: skip
LINES = st.one_of(QUESTIONS, TOKENS)


def _pool(*valid: bytes) -> st.SearchStrategy[bytes]:
    """A valid value half of the time, else any token."""
    return st.one_of(st.sampled_from(valid), TOKENS)


# Ports and hosts come from fixed lists: a generated "80" or "8080" must never be bound.
PORTS = st.sampled_from([b"0", b"-1", b"65536", b"99999", b"abc", b"", b"1e400", b"0x10", b"\xff"])
HOSTS = st.sampled_from(
    [b"127.0.0.1", b"[::1]", b"::1", b"0.0.0.0", b"", b"[::1", b"localhost",
     b"no-such-host.invalid", b"192.0.2.1", b"a b", b"\xff", b"-x"]
)  # fmt: skip
VALUES: dict[bytes, st.SearchStrategy[bytes]] = {
    b"--port": PORTS,
    b"--host": HOSTS,
    b"--persona": _pool(b"scout", b"helper"),
    b"-p": _pool(b"scout", b"helper"),
    b"--conversation": _pool(b"c1", b"a" * 128),
    b"-c": _pool(b"c1"),
    b"--model": _pool(b"glm-4.7"),
    b"--base-url": _pool(b"http://127.0.0.1:9/v4"),
    b"--latency-ms": _pool(b"0", b"5"),
    b"--fail-rate": _pool(b"0.5"),
    b"--fail-seed": _pool(b"3"),
}
SETTINGS: dict[str, st.SearchStrategy[bytes]] = {
    "LLM_TIMEOUT": _pool(b"5", b"0.5"),
    "LLM_TEMPERATURE": _pool(b"0.3", b""),
    "LLM_MODEL": _pool(b"glm-4.5-air"),
    "LLM_THINKING": _pool(b"disabled"),
    "LLM_MAX_RETRIES": _pool(b"0"),
    "OPENAI_BASE_URL": _pool(b"http://127.0.0.1:9/v4"),
    "PERSONAS_DIR": _pool(b"", b".."),
    "DATA_DIR": _pool(b"", b"..", b"data2"),
    "BOT_HOST": HOSTS,
    "BOT_PORT": PORTS,
    "BOT_API_TOKEN": _pool(b"t0ken-123"),
    "WEB_SEARCH_MODE": _pool(b"client", b"off"),
    "WEB_SEARCH_COUNT": _pool(b"3"),
    "HISTORY_TURNS": _pool(b"0"),
    "LOG_LEVEL": _pool(b"debug"),
    "MAX_TOOL_ROUNDS": _pool(b"0"),
    "TOOL_TIMEOUT": _pool(b"1"),
}
FLAGS = {b"--json", b"--mock"}
STDIN = st.lists(LINES, max_size=4).map(b"\n".join)


@st.composite
def environments(draw: st.DrawFn) -> dict[str, bytes]:
    """Usually nothing; else one or two settings, each valid or not."""
    if draw(st.integers(0, 2)):
        return {}
    names = draw(st.lists(st.sampled_from(sorted(SETTINGS)), min_size=1, max_size=2, unique=True))
    return {name: draw(SETTINGS[name]) for name in names}


@st.composite
def command_lines(draw: st.DrawFn) -> list[bytes]:
    """A command, some of its options with values, maybe a positional, rarely a stray token."""
    commands = [b"chat"] * 4 + [b"personas", b"serve", b"mock", b"record", b"replay"]
    command = draw(st.sampled_from([*commands, b"bogus", b"--version"]))
    argv = [command]
    chosen = st.sampled_from(OPTIONS.get(command, [b"--x"]))
    for option in draw(st.lists(chosen, max_size=2, unique=True)):
        argv.append(option)
        if option not in FLAGS:
            argv.append(draw(VALUES.get(option, TOKENS)))
    if command == b"mock" and b"--port" not in argv:
        argv += [b"--port", b"0"]  # never the default 8090: another program may use it
    if command != b"replay" and draw(st.booleans()):  # replay alone replays every fixture
        argv.append(draw(LINES))  # the message (no message: an interactive chat), a path...
    if draw(st.integers(0, 7)) == 0:
        argv.insert(draw(st.integers(1, len(argv))), draw(TOKENS))
    return argv


def _base_env(tmp: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        # Strict decoding, as Python does in a UTF-8 locale such as en_US.UTF-8 (C.UTF-8 and C
        # escape undecodable bytes instead, which would hide what a user's terminal sees).
        "PYTHONIOENCODING": "utf-8:strict",
        "PERSONAS_DIR": str(REPO / "personas"),
        "DATA_DIR": str(tmp / "data"),
        "LLM_MAX_RETRIES": "0",
        "BOT_PORT": "0",  # serve never binds the default 8080
        "PYTHONUNBUFFERED": "1",
    }


def _run(
    argv: list[bytes], stdin: bytes, env: dict[str, str | bytes], cwd: Path
) -> tuple[int | None, str, str]:
    """(exit code, or None if still running because it serves; stdout; stderr)."""
    command = [sys.executable.encode(), b"-m", b"generic_framework", *argv]
    if argv[0] in (b"serve", b"mock"):
        return _run_server(command, stdin, env, cwd)
    done = subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        env=env,  # type: ignore[arg-type]  # bytes values are passed as they are
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return (
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _run_server(
    command: list[bytes], stdin: bytes, env: dict[str, str | bytes], cwd: Path
) -> tuple[int | None, str, str]:
    """A server command, until it exits or says it serves (then it is stopped): a condition,
    not a time, since a process that refuses its options may take seconds to exit on a busy
    machine and a server seconds to start."""
    (cwd / "stdin").write_bytes(stdin)
    out_path, err_path = cwd / "stdout", cwd / "stderr"
    with (
        (cwd / "stdin").open("rb") as given,
        out_path.open("wb") as out,
        err_path.open("wb") as err,
    ):
        proc = subprocess.Popen(command, stdin=given, stdout=out, stderr=err, env=env, cwd=cwd)  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while proc.poll() is None and SERVING.encode() not in _bytes(out_path, err_path):
            assert time.monotonic() < deadline, "a server command neither exited nor served"
            time.sleep(0.05)
        code = proc.poll()
        if code is None:
            proc.terminate()
            proc.wait(10)
    return code, out_path.read_text(errors="replace"), err_path.read_text("utf-8", "replace")


def _bytes(*paths: Path) -> bytes:
    return b"".join(path.read_bytes() for path in paths)


def _check(argv: list[bytes], code: int | None, out: str, err: str) -> None:
    assert "Traceback (most recent call last)" not in err + out
    assert "internal error" not in err
    assert "\u2502" not in err  # the frame of rich's pretty tracebacks
    if code is None:
        assert argv[0] in (b"serve", b"mock"), "only a server may still run"
        assert SERVING in err + out, "a server still running must say where"
        return
    assert code in (0, 1, 2), code
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    if code == 2:
        assert errors, "a usage or configuration error says what is wrong"
    if code == 1 and argv[0] != b"replay":
        assert errors or "no recorded answer" in err, "a failure says what went wrong"


CANADA = b"What is the capital of Canada?"


# The bad inputs first found by hand, always run; hypothesis explores around them.
@example(argv=[b"chat"], stdin=CANADA + b"\n\xff\xfe bad\n" + CANADA, variables={})
@example(argv=[b"chat", b"\xff\xfe"], stdin=b"", variables={})
@example(argv=[b"chat", b"-c", b"a" * 300, CANADA], stdin=b"", variables={})
@example(argv=[b"chat", CANADA], stdin=b"", variables={"OPENAI_BASE_URL": b"http://h/v4?key=k"})
@example(argv=[b"chat", CANADA], stdin=b"", variables={"LLM_TIMEOUT": b"inf"})
@example(argv=[b"chat", CANADA], stdin=b"", variables={"LLM_TEMPERATURE": b"abc"})
@example(argv=[b"personas"], stdin=b"", variables={"PERSONAS_DIR": b".."})
@example(argv=[b"mock", b"--port", b"99999"], stdin=b"", variables={})
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(argv=command_lines(), stdin=STDIN, variables=environments())
def test_no_command_line_gets_a_traceback(
    tmp_path_factory: pytest.TempPathFactory,
    argv: list[bytes],
    stdin: bytes,
    variables: dict[str, bytes],
) -> None:
    note(f"argv={argv!r} stdin={stdin!r} env={variables!r}")
    tmp = tmp_path_factory.mktemp("cli")
    cwd = tmp / "cwd" / "here"
    cwd.mkdir(parents=True)
    env: dict[str, str | bytes] = {**_base_env(tmp), **variables}
    code, out, err = _run(argv, stdin, env, cwd)
    note(f"exit {code}\nstdout: {out[-500:]}\nstderr: {err[-1500:]}")
    _check(argv, code, out, err)
