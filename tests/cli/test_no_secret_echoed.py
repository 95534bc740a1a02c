"""A secret put in a URL, and the configured key, are never echoed by any entry point.

The key is ``SECRET``, a value of no recognisable shape, so only the configured-key rule and
the URL rule (query, fragment and user information hidden whatever they hold) can catch it.
Every command runs as a subprocess; whatever it prints, on either stream, is searched.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from support import free_port, run_cli, start_cli, wait_healthy

pytestmark = pytest.mark.e2e

SECRET = "Plain0badc0deSecret"
IN_URL = "Other0badc0deInUrl"  # a secret of the MCP server's URL only, never registered
BASE = "https://api.z.ai/api/paas/v4"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)


COMMANDS = [
    ["chat", "hello"],
    ["serve", "--port", "0"],
    ["personas"],
    ["record", "hello", "--out", "{tmp}/fixture.json"],
    ["replay"],
    ["db", "upgrade"],
    ["db", "copy", "--from", "{tmp}/a.sqlite3", "--to", "{tmp}/b.sqlite3"],
    ["usage"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_key_in_the_base_urls_query_and_fragment_is_never_echoed(
    env: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    url = f"{BASE}?{SECRET}#key={SECRET}"
    args = [part.format(tmp=tmp_path) for part in command]
    done = run(args, {**env, "OPENAI_API_KEY": SECRET, "OPENAI_BASE_URL": url})
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "OPENAI_BASE_URL must not have a query string or fragment" in done.stderr
    assert f"(got '{BASE}?***#***')" in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"{BASE}?sk-{SECRET}",
        f"{BASE}#sk-{SECRET}",
        f"{BASE}#{SECRET}",
        f"https://{SECRET}@api.z.ai/api/paas/v4",
        f"https://user:{SECRET}@api.z.ai/api/paas/v4",
    ],
)
def test_no_shape_of_secret_in_the_base_url_is_echoed(env: dict[str, str], url: str) -> None:
    done = run(["chat", "hello"], {**env, "OPENAI_API_KEY": "another-key", "OPENAI_BASE_URL": url})
    assert done.returncode == 2
    assert SECRET not in done.stderr and done.stderr.startswith("error: OPENAI_BASE_URL")


def test_the_configured_key_is_not_echoed_by_another_settings_error(env: dict[str, str]) -> None:
    # The key quoted in a setting whose value is shown: the key is hidden there too.
    done = run(["chat", "hello"], {**env, "OPENAI_API_KEY": SECRET, "LLM_MODEL": f"x {SECRET}"})
    assert done.returncode == 2
    assert SECRET not in done.stderr and done.stderr.startswith("error: LLM_MODEL")


def test_the_mock_never_logs_a_key_a_client_put_in_a_path(env: dict[str, str]) -> None:
    mock = start_cli(
        ["mock", "--port", "0"], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert mock.stdout is not None
        lines = [mock.stdout.readline() for _ in range(3)]
        base = lines[1].split()[-1]
        for path in (f"?api_key={SECRET}", f"?sk-{SECRET}", f"?x=1#token={SECRET}"):
            httpx.post(f"{base}/chat/completions{path}", json={}, timeout=10)
    finally:
        mock.terminate()
        output = mock.communicate(timeout=30)[0]
    assert "/chat/completions" in output  # the access log was written...
    assert SECRET not in output  # ...without the key


# ------------------------------------------------------------------ serve: logs and bodies


class _Echoing(BaseHTTPRequestHandler):
    """An upstream whose every error quotes the request's Authorization header (the key)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        quoted = self.headers.get("authorization", "")
        body = json.dumps({"error": {"code": "1214", "message": f"bad request: {quoted}"}})
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def echoing_upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echoing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/paas/v4"
    finally:
        server.shutdown()
        server.server_close()


def test_serve_never_logs_or_answers_with_the_key(
    env: dict[str, str], echoing_upstream: str
) -> None:
    port = free_port()
    service_env = {
        **env,
        "OPENAI_API_KEY": SECRET,
        "OPENAI_BASE_URL": echoing_upstream,
        "WEB_SEARCH_MODE": "mcp",
        "WEB_SEARCH_MCP_URL": f"https://mcp.invalid/mcp?{IN_URL}#{IN_URL}",
        "LOG_LEVEL": "DEBUG",
    }
    service = start_cli(
        ["serve", "--port", str(port)],
        service_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_healthy(service, url), "serve did not start"
        answers = [
            httpx.post(
                f"{url}/v1/chat/completions",
                json={"model": "helper", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            ),
            httpx.get(f"{url}/readyz", timeout=30),
            httpx.get(f"{url}/v1/bot", timeout=30),
            httpx.get(f"{url}/v1/conversations/{SECRET}?api_key={SECRET}", timeout=30),
        ]
    finally:
        service.terminate()
        log = service.communicate(timeout=30)[0]
    assert answers[0].status_code >= 400 and "bad request" in answers[0].text
    assert all(SECRET not in answer.text for answer in answers)
    assert "search_web through the Web Search MCP server (https://mcp.invalid/mcp?***#***)" in log
    assert SECRET not in log and IN_URL not in log
