"""Service hardening: the loopback rule, 413, path traversal, and slow clients on raw sockets.

Slow clients run against the real app under the real uvicorn configuration
(:func:`generic_framework.service.uvicorn_config`) in a thread, with the head and body timeouts
shortened so each proof takes a second; one slow test checks the shipped defaults on a process.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_fakes import FakePersona
from service_processes import (
    REPO,
    TOKEN,
    base_env,
    bot_process,
    mock_process,
    served_in_thread,
)

from generic_framework.config import Settings
from generic_framework.runtime import Runtime
from generic_framework.service import create_app, uvicorn_config
from generic_framework.service.middleware import BodyLimitMiddleware
from generic_framework.service.server import HEAD_TIMEOUT, MAX_HEAD_BYTES
from generic_framework.store import SQLiteStore

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SHORT = 0.5
"""The head and body timeouts of the in-thread server, in seconds."""


# ------------------------------------------------------------------------------ helpers


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The app under uvicorn with the service's configuration, timeouts shortened to SHORT."""
    settings = Settings.defaults(data_dir=tmp_path, personas_dir=tmp_path, bot_max_body=4096)
    store = SQLiteStore(tmp_path / "conversations.sqlite3")
    app = create_app(runtime=Runtime(settings, store=store), personas={"scout": FakePersona()})
    (limit,) = [m for m in app.user_middleware if m.cls is BodyLimitMiddleware]
    limit.kwargs["read_timeout"] = SHORT
    config = uvicorn_config(app, settings, "127.0.0.1", 0, head_timeout=SHORT, log_level="error")
    with served_in_thread(config) as address:
        yield address
    store.close()


def trickle(sock: socket.socket, data: bytes, every: float, limit: float) -> tuple[float, bytes]:
    """Send ``data`` a byte at a time until the server closes; return (seconds, answer)."""
    started = time.monotonic()
    sock.settimeout(every)
    for byte in data:
        if time.monotonic() - started > limit:
            break
        try:
            sock.sendall(bytes([byte]))
            answer = sock.recv(65536)
        except TimeoutError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started, b""
        return time.monotonic() - started, answer + _rest(sock)
    raise AssertionError(f"the server still listened after {time.monotonic() - started:.1f}s")


def _rest(sock: socket.socket, wait: float = 0.5) -> bytes:
    sock.settimeout(wait)
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (TimeoutError, ConnectionResetError):
        pass
    return b"".join(chunks)


ENDLESS_HEADER = b"X-Slow: " + b"a" * 4000


# ------------------------------------------------------------------------------ slow clients


def test_a_trickled_request_head_is_cut_off(live: tuple[str, int]) -> None:
    with socket.create_connection(live) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        seconds, answer = trickle(sock, ENDLESS_HEADER, every=0.05, limit=8)
    assert seconds < SHORT + 3
    assert answer == b""  # closed, never answered


def test_a_trickled_second_request_on_a_kept_alive_connection_is_cut_off(
    live: tuple[str, int],
) -> None:
    with socket.create_connection(live) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        seconds, answer = trickle(sock, ENDLESS_HEADER, every=0.05, limit=8)
    assert seconds < SHORT + 3
    assert answer == b""


def test_a_trickled_body_gets_408(live: tuple[str, int]) -> None:
    with socket.create_connection(live) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"
        )
        seconds, answer = trickle(sock, b" " * 3000, every=0.05, limit=8)
    assert seconds < SHORT + 3
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"request_timeout" in answer


def test_the_shipped_body_timeout_is_30_seconds(tmp_path: Path) -> None:
    app = create_app(Settings.defaults(data_dir=tmp_path), personas={"scout": FakePersona()})
    (limit,) = [m for m in app.user_middleware if m.cls is BodyLimitMiddleware]
    assert limit.kwargs.get("read_timeout", 30.0) == 30.0


@pytest.mark.slow
@pytest.mark.e2e
def test_the_service_process_cuts_off_a_trickled_head_with_its_defaults(tmp_path: Path) -> None:
    with mock_process(tmp_path) as mock, bot_process(tmp_path, mock) as bot:
        with socket.create_connection(("127.0.0.1", bot.port)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
            seconds, answer = trickle(sock, ENDLESS_HEADER, every=0.2, limit=HEAD_TIMEOUT + 10)
        assert seconds < HEAD_TIMEOUT + 5
        assert answer == b""


# ------------------------------------------------------------------------------ limits


def raw(address: tuple[str, int], request: bytes) -> bytes:
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(request)
        return _rest(sock, wait=2)


def read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (the connection stays open)."""
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def test_413_for_a_declared_and_for_a_chunked_oversized_body(live: tuple[str, int]) -> None:
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\n"
    )
    declared = raw(live, head + b"Content-Length: 100000\r\n\r\n")
    assert declared.startswith(b"HTTP/1.1 413")
    chunk = b"x" * 1000
    chunked = raw(
        live,
        head + b"Transfer-Encoding: chunked\r\n\r\n" + (b"3e8\r\n" + chunk + b"\r\n") * 6,
    )
    assert chunked.startswith(b"HTTP/1.1 413")
    assert b"request_too_large" in chunked


def head_of(size: int, path: str = "/healthz") -> bytes:
    """A GET request head of exactly ``size`` bytes (the blank line included)."""
    start = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Pad: ".encode()
    end = b"\r\n\r\n"
    return start + b"a" * (size - len(start) - len(end)) + end


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.parametrize("size", [4_096, MAX_HEAD_BYTES, MAX_HEAD_BYTES + 1, 40_000, 70_000])
def test_a_request_head_over_16_kib_gets_431_even_when_it_arrives_whole(
    live: tuple[str, int], size: int
) -> None:
    # One write: the head is whole in the server's first read, which h11's own limit (on
    # incomplete heads only) never saw; 40-70 KB heads used to be answered 200.
    answer = raw(live, head_of(size))
    if size <= MAX_HEAD_BYTES:
        assert status_of(answer) == 200, answer[:200]
    else:
        assert status_of(answer) == 431, answer[:200]
        assert b'"code": "request_head_too_large"' in answer
        assert f"larger than {MAX_HEAD_BYTES} bytes".encode() in answer


def send_until_answered(sock: socket.socket, data: bytes, piece: int) -> bytes:
    """Send ``data`` in pieces, stopping as soon as the server answers; return the answer."""
    for start in range(0, len(data), piece):
        sock.sendall(data[start : start + piece])
        ready, _, _ = select.select([sock], [], [], 0.05)
        if ready:
            break
    return _rest(sock, wait=2)


def test_a_request_head_over_16_kib_gets_431_when_it_arrives_in_pieces(
    live: tuple[str, int],
) -> None:
    with socket.create_connection(live, timeout=5) as sock:
        answer = send_until_answered(sock, head_of(40_000), piece=4_000)
    assert status_of(answer) == 431, answer[:200]


def test_an_oversized_pipelined_head_is_refused_after_the_first_answer(
    live: tuple[str, int],
) -> None:
    first = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    answer = raw(live, first + head_of(20_000))
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"HTTP/1.1 431" in answer


def test_no_token_means_no_remote_bind() -> None:
    env = {**base_env(REPO), "DATA_DIR": "data-never-created", "PERSONAS_DIR": str(REPO)}
    for host in ("0.0.0.0", "::", "192.0.2.10", "bot.example.org"):
        done = subprocess.run(
            [sys.executable, "-m", "generic_framework", "serve", "--host", host, "--port", "0"],
            check=False,
            env=env,
            cwd=REPO,
            capture_output=True,
            timeout=30,
        )
        assert done.returncode == 2, done.stderr
        assert b"BOT_API_TOKEN is not set: refusing to bind" in done.stderr
        assert b"Uvicorn running" not in done.stdout + done.stderr
    assert not (REPO / "data-never-created").exists()


# ------------------------------------------------------------------------------ traversal

TRAVERSING_IDS = [
    "..",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fetc",
    "..%5C..%5Cwindows",
    "a%00b",
    "x" * 129,
    "%C3%A9t%C3%A9",
    "a.b",
]


@pytest.mark.parametrize("conversation", TRAVERSING_IDS)
def test_conversation_ids_that_are_not_plain_names_are_refused(
    live: tuple[str, int], conversation: str
) -> None:
    host, port = live
    for method, body in (("GET", b""), ("DELETE", b""), ("POST", b'{"persona":"scout"}')):
        path = f"/v1/conversations/{conversation}"
        if method == "POST":
            path += "/messages"
        request = (
            f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        answer = raw((host, port), request)
        status = int(answer.split(b" ", 2)[1])
        assert status in (400, 404), answer[:300]
        if status == 400:
            assert b"invalid_conversation_id" in answer


def test_raw_dot_dot_paths_never_escape(live: tuple[str, int]) -> None:
    secret_text = (REPO / "pyproject.toml").read_bytes()[:40]
    for path in (
        "/static/../../pyproject.toml",
        "/static/..%2f..%2f..%2fpyproject.toml",
        "/static/%2e%2e/%2e%2e/%2e%2e/pyproject.toml",
        "/v1/conversations/../../../pyproject.toml",
        "/../../../../etc/passwd",
    ):
        answer = raw(
            live, f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
        )
        assert int(answer.split(b" ", 2)[1]) in (400, 404), (path, answer[:200])
        assert secret_text not in answer and b"root:" not in answer


def test_persona_names_are_looked_up_never_opened(live: tuple[str, int]) -> None:
    host, port = live
    for name in ("../../../etc/passwd", "/etc/passwd", "..\\..\\scout", "scout/../scout", "%2e"):
        turn = httpx.post(
            f"http://{host}:{port}/v1/conversations/c1/messages",
            json={"persona": name, "content": "hi"},
            timeout=30,
        )
        assert (turn.status_code, turn.json()["error"]["code"]) == (404, "model_not_found")
        chat = httpx.post(
            f"http://{host}:{port}/v1/chat/completions",
            json={"model": name, "messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert (chat.status_code, chat.json()["error"]["code"]) == (404, "model_not_found")


def test_the_cli_refuses_a_persona_name_that_is_a_path(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PERSONAS_DIR": str(REPO / "personas"), "DATA_DIR": str(tmp_path)}
    for name in ("../personas/scout", str(REPO / "personas" / "scout.toml")):
        done = subprocess.run(
            [sys.executable, "-m", "generic_framework", "chat", "--mock", "--persona", name, "hi"],
            check=False,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 2
        # Refused by the persona-name rule itself, before any file is looked at.
        assert done.stderr.startswith(b"error: invalid value for '--persona'"), done.stderr
        assert b"a persona name must be" in done.stderr
        assert done.stderr.count(b"\n") == 1
    assert os.listdir(tmp_path) == [] or all(p.name != "scout" for p in tmp_path.iterdir())
