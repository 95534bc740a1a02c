"""No byte the project produces holds the API key, whatever the upstream echoes back.

A recognisable fake key in Z.AI's shape goes through recording (in this process, against a fake
upstream that echoes the key in headers, bodies and error messages), replay, the CLI's error
paths, the service at ``LOG_LEVEL=DEBUG`` in front of a mock whose error messages contain
the key: once with text logs, once with ``LOG_FORMAT=json``, ``/metrics`` and OpenTelemetry
spans (console exporter, prompts and completions captured), and the Web Search MCP path (the
key is the Bearer token of the MCP session, and the mock's MCP endpoint echoes it in its 401
answer). Then every file written (fixtures, logs, SQLite with its WAL), every stdout and
stderr, every HTTP body, every request the model would get and every log record is searched
for the key and for each of its two halves.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mock_helpers import chat, completion, exchange, make_fixture, system, user
from service_processes import PERSONAS, REPO, TOKEN, Process, base_env, bot_process

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.mock import Fixture, MockServer
from generic_framework.mock.mcp_endpoint import MCP_SEARCH_PATH
from generic_framework.recording.recorder import record
from generic_framework.runtime import Runtime

pytestmark = pytest.mark.e2e

FAKE_KEY = "0badc0de" * 4 + ".RelSecretKey0042"
NEEDLES = [FAKE_KEY.encode(), FAKE_KEY[:32].encode(), FAKE_KEY[33:].encode()]
ECHO = f"the key {FAKE_KEY} is not valid here (Bearer {FAKE_KEY})"
PROXY_PAGE = f"<html><body>502 Bad Gateway<pre>Authorization: Bearer {FAKE_KEY}</pre></body></html>"


def leaks(data: bytes) -> list[str]:
    return [needle.decode() for needle in NEEDLES if needle in data]


def scan_tree(root: Path, skip: Path | None = None) -> dict[str, list[str]]:
    """Every file below ``root`` (but ``skip``) that holds a needle."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and (skip is None or skip not in path.parents):
            hits = leaks(path.read_bytes())
            if hits:
                found[str(path.relative_to(root))] = hits
    return found


@pytest.fixture
def debug_log(tmp_path: Path) -> Iterator[Path]:
    """Every logger at DEBUG into a file, as a deployment with LOG_LEVEL=DEBUG would write."""
    path = tmp_path / "outputs" / "debug.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s %(args)s"))
    root = logging.getLogger()
    before = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield path
    root.removeHandler(handler)
    root.setLevel(before)
    handler.close()


# ------------------------------------------------------------------------------ upstreams


def echoing_upstream(request: httpx.Request) -> httpx.Response:
    """A fake Z.AI that reflects the key everywhere it can."""
    body = json.loads(request.content)
    question = body["messages"][-1]["content"]
    headers = {"set-cookie": f"session={FAKE_KEY}", "x-echo-key": FAKE_KEY}
    if "refuse" in question:
        error = {"error": {"code": "1002", "message": ECHO}}
        return httpx.Response(401, json=error, headers=headers)
    answer = completion(f"Echo: {request.headers['authorization']}")
    answer["echo"] = {"api_key": FAKE_KEY, "note": ECHO}
    return httpx.Response(200, json=answer, headers=headers)


def mock_fixtures(target: Path) -> Path:
    """Fixtures for the CLI and service runs: errors whose messages carry the key."""
    target.mkdir(parents=True)

    def failing(name: str, text: str, fault: dict[str, Any]) -> None:
        made = make_fixture(
            name, exchange(chat(system(), user(text)), completion("fine"), faults=[fault])
        )
        (target / f"{name}.json").write_text(made.to_json(), encoding="utf-8")

    failing("refused", "refuse me", {"kind": "http_error", "status": 401, "code": "1002",
                                     "message": ECHO})  # fmt: skip
    failing("broken", "break me", {"kind": "http_error", "status": 500, "code": "500",
                                   "message": ECHO, "times": None})  # fmt: skip
    failing("proxied", "proxy me", {"kind": "malformed_body", "status": 502,
                                    "content_type": "text/html", "body": PROXY_PAGE,
                                    "times": None})  # fmt: skip
    answered = make_fixture("answered", exchange(chat(system(), user("say hi")), completion("hi")))
    (target / "answered.json").write_text(answered.to_json(), encoding="utf-8")
    return target


def cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )


def cli_bytes(
    args: list[str | bytes], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    """:func:`cli` with arguments that need not be UTF-8."""
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=60,
        check=False,
    )


# ------------------------------------------------------------------------------ the runs


async def test_record_and_debug_logs_hold_no_key(tmp_path: Path, debug_log: Path) -> None:
    outputs = debug_log.parent
    settings = Settings.defaults(
        api_key=FAKE_KEY, personas_dir=PERSONAS, data_dir=tmp_path, llm_max_retries=1
    )
    transport = httpx.MockTransport(echoing_upstream)
    for name, message, stream in (
        ("plain", "say hi", False),
        ("streamed", "say hi", True),
        ("refused", "refuse me", False),
    ):
        await record(settings, message, outputs / f"{name}.json", stream=stream,
                     transport=transport)  # fmt: skip
    written = json.loads((outputs / "plain.json").read_text())
    assert written["exchanges"][0]["response"]["body"]["choices"]  # the answer was recorded
    assert "[REDACTED]" in (outputs / "refused.json").read_text()
    assert debug_log.stat().st_size > 0
    assert scan_tree(outputs) == {}


def test_replay_and_cli_errors_hold_no_key(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    fixtures = mock_fixtures(tmp_path / "inputs")
    env = {**base_env(tmp_path), "OPENAI_API_KEY": FAKE_KEY, "LOG_LEVEL": "DEBUG",
           "PERSONAS_DIR": str(PERSONAS), "DATA_DIR": str(outputs / "data"),
           "LLM_MAX_RETRIES": "0"}  # fmt: skip
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0"]
    runs: dict[str, subprocess.CompletedProcess[bytes]] = {}
    with Process(args, outputs / "mock.log", base_env(tmp_path), tmp_path) as mock:
        upstream = {**env, "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4"}
        runs["chat-401"] = cli(["chat", "refuse me"], upstream, tmp_path)
        runs["chat-500"] = cli(["chat", "break me"], upstream, tmp_path)
        runs["chat-proxy"] = cli(["chat", "--json", "proxy me"], upstream, tmp_path)
        runs["chat-ok"] = cli(["chat", "--json", "say hi"], upstream, tmp_path)
        runs["record"] = cli(["record", "--out", str(outputs / "rec.json"), "refuse me"],
                             upstream, tmp_path)  # fmt: skip
    runs["refused"] = cli(["chat", "say hi"], {**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v4"},
                          tmp_path)  # fmt: skip
    in_url = {**env, "OPENAI_BASE_URL": f"ftp://{FAKE_KEY}@zai.invalid/"}
    runs["bad-url"] = cli(["chat", "say hi"], in_url, tmp_path)
    runs["bad-setting"] = cli(["chat", "say hi"], {**env, "LLM_TEMPERATURE": FAKE_KEY}, tmp_path)
    runs["replay"] = cli(["replay", str(outputs / "rec.json")], env, tmp_path)
    # The refusals at the edge quote what was given: a key in it must not come back.
    half, other = FAKE_KEY[:32], FAKE_KEY[33:]  # neither alone looks like a Z.AI key
    refusals = {
        "url-query": {**env, "OPENAI_BASE_URL": f"http://127.0.0.1:9/v4?key={half}"},
        "url-password": {**env, "OPENAI_BASE_URL": f"http://user:{other}@127.0.0.1:9/v4"},
        "url-user": {**env, "OPENAI_BASE_URL": f"https://{half}@127.0.0.1:9/v4"},
        "bad-timeout": {**env, "LLM_TIMEOUT": FAKE_KEY},
    }
    for name, bad_env in refusals.items():
        runs[name] = cli(["chat", "say hi"], bad_env, tmp_path)
    options = {
        "option-url": ["chat", "--base-url", f"http://127.0.0.1:9/v4?api_key={half}", "hi"],
        "option-conversation": ["chat", "-c", FAKE_KEY, "hi"],
        "option-model": ["chat", "--model", f"{FAKE_KEY} x", "hi"],
    }
    for name, args in options.items():
        runs[name] = cli(args, env, tmp_path)
    runs["not-utf8"] = cli_bytes(["chat", b"\xff" + FAKE_KEY.encode()], env, tmp_path)

    assert runs["chat-ok"].returncode == 0
    assert [runs[n].returncode for n in ("chat-401", "chat-500", "chat-proxy", "refused")] == [
        1, 1, 1, 1,
    ]  # fmt: skip
    assert runs["bad-url"].returncode == runs["bad-setting"].returncode == 2
    for name in [*refusals, *options, "not-utf8"]:
        assert runs[name].returncode == 2, (name, runs[name].stderr)
        assert runs[name].stderr.startswith(b"error: "), (name, runs[name].stderr)
    assert (outputs / "rec.json").exists()
    for name, done in runs.items():
        assert leaks(done.stdout + done.stderr) == [], (name, done.stdout, done.stderr)
    assert scan_tree(outputs) == {}


def test_service_errors_and_debug_log_hold_no_key(tmp_path: Path) -> None:
    fixtures = mock_fixtures(tmp_path / "inputs")
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0"]
    bodies: list[bytes] = []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with Process(args, outputs / "mock.log", base_env(outputs), outputs) as mock:
        bot = bot_process(outputs, mock, OPENAI_API_KEY=FAKE_KEY, LOG_LEVEL="DEBUG",
                          LLM_MAX_RETRIES="1")  # fmt: skip
        with bot:
            for text in ("refuse me", "break me", "proxy me", "say hi"):
                for stream in (False, True):
                    body = {"model": "scout", "stream": stream,
                            "messages": [{"role": "user", "content": text}]}  # fmt: skip
                    url = f"{bot.url}/v1/chat/completions"
                    bodies.append(httpx.post(url, json=body, headers=auth, timeout=30).content)
                url = f"{bot.url}/v1/conversations/c1/messages"
                turn = {"persona": "scout", "content": text}
                bodies.append(httpx.post(url, json=turn, headers=auth, timeout=30).content)
            for path in ("/v1/conversations/c1", "/v1/models", "/readyz", "/openapi.json", "/"):
                bodies.append(httpx.get(f"{bot.url}{path}", headers=auth, timeout=30).content)
            bodies += refused_requests(bot.url, auth)
    assert any(b"API key was refused" in body for body in bodies)
    assert any(b"upstream_error" in body for body in bodies)
    assert (outputs / "bot.log").stat().st_size > 0
    assert [leaks(body) for body in bodies if leaks(body)] == []
    assert scan_tree(outputs) == {}


def test_json_logs_metrics_and_traces_hold_no_key(tmp_path: Path) -> None:
    fixtures = mock_fixtures(tmp_path / "inputs")
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0"]
    bodies: list[bytes] = []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    telemetry = {"LOG_FORMAT": "json", "LOG_LEVEL": "DEBUG", "OTEL_TRACES_EXPORTER": "console",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}  # fmt: skip
    with Process(args, outputs / "mock.log", base_env(outputs), outputs) as mock:
        bot = bot_process(outputs, mock, OPENAI_API_KEY=FAKE_KEY, LLM_MAX_RETRIES="1",
                          **telemetry)  # fmt: skip
        with bot:
            for text, stream in (("refuse me", False), ("break me", True), ("say hi", False)):
                body = {"model": "scout", "stream": stream,
                        "messages": [{"role": "user", "content": text}]}  # fmt: skip
                url = f"{bot.url}/v1/chat/completions"
                bodies.append(httpx.post(url, json=body, headers=auth, timeout=30).content)
            for path in ("/metrics", "/readyz"):
                bodies.append(httpx.get(f"{bot.url}{path}", headers=auth, timeout=30).content)
    log = (outputs / "bot.log").read_text(encoding="utf-8")
    records = [json.loads(line) for line in log.splitlines() if line.startswith('{"time": ')]
    turns = [r for r in records if r.get("event") == "turn"]
    assert {r["outcome"] for r in turns} == {"error", "completed"}
    assert all(r["turn_id"] and r["persona"] == "scout" for r in turns)
    assert '"gen_ai.input.messages"' in log  # the spans were written, with their content
    assert b"generic_framework_upstream_requests_total" in bodies[-2]
    assert [leaks(body) for body in bodies if leaks(body)] == []
    assert scan_tree(outputs) == {}


def refused_requests(url: str, auth: dict[str, str]) -> list[bytes]:
    """Bodies of requests the service refuses, each carrying the key somewhere."""
    ask = {"model": "scout", "messages": [{"role": "user", "content": "say hi"}]}
    posts = [
        {**ask, "conversation_id": FAKE_KEY},  # has a dot: refused
        {**ask, "stream": FAKE_KEY},  # not a boolean
        {**ask, "model": FAKE_KEY},  # no such persona
    ]
    bodies = [
        httpx.post(f"{url}/v1/chat/completions", json=b, headers=auth, timeout=30).content
        for b in posts
    ]
    wrong = {"Authorization": f"Bearer {FAKE_KEY}"}
    bodies.append(httpx.get(f"{url}/v1/models", headers=wrong, timeout=30).content)
    bodies.append(httpx.get(f"{url}/v1/conversations/{FAKE_KEY}", headers=auth, timeout=30).content)
    # A head over 16 KiB that carries the key: the 431 must not repeat it.
    host, port = url.removeprefix("http://").split(":")
    head = f"GET /v1/models HTTP/1.1\r\nHost: bot\r\nConnection: close\r\nX-Key: {FAKE_KEY}"
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head.encode() + b"\r\nX-Pad: " + b"a" * 20_000 + b"\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431"), answer[:100]
    return [*bodies, answer]


def mcp_search_fixture() -> Fixture:
    """The MCP search answers 401 with the key in its message once, then results."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "web_search_prime", "arguments": {"search_query": "late ferry"}},
    }
    text = json.dumps(
        json.dumps(
            [
                {
                    "title": "Ferry",
                    "link": "https://f.example/1",
                    "content": "A late ferry.",
                    "refer": "ref_1",
                }
            ]
        )
    )
    result = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }
    fault = {"kind": "http_error", "status": 401, "code": "1002", "message": ECHO}
    return Fixture.model_validate({"name": "mcp_echo", "user_input": "// late ferry",
        "exchanges": [{"request": {"method": "POST", "path": MCP_SEARCH_PATH, "body": call},
                       "response": {"body": result}, "faults": [fault]}]})  # fmt: skip


async def test_the_mcp_search_path_holds_no_key(tmp_path: Path, debug_log: Path) -> None:
    outputs = debug_log.parent
    bodies: list[bytes] = []
    answers = iter(
        [
            completion("", calls=[{"id": "s1", "type": "function",
                "function": {"name": "search_web", "arguments": '{"query": "late ferry"}'}}]),
            completion("Refused, as expected."),
            completion("", calls=[{"id": "s2", "type": "function",
                "function": {"name": "search_web", "arguments": '{"query": "late ferry"}'}}]),
            completion("A late ferry runs [ref_1]."),
        ]
    )  # fmt: skip

    def model(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200, json=next(answers))

    async with MockServer([mcp_search_fixture()], api_keys={FAKE_KEY}) as server:
        settings = Settings.defaults(
            api_key=FAKE_KEY, data_dir=outputs / "data", web_search_mode="mcp",
            web_search_mcp_url=server.url + MCP_SEARCH_PATH, llm_max_retries=0,
            base_url="http://zai.test/api/paas/v4",
        )  # fmt: skip
        async with Runtime(settings, transport=httpx.MockTransport(model)) as runtime:
            persona = Persona("seeker", "Search.", runtime=runtime)
            refused = await persona.respond("// late ferry", conversation_id="c1")
            found = await persona.respond("// late ferry", conversation_id="c1")
        report = server.report()
    assert not refused.rounds[0].results[0].ok
    assert "refused the call with HTTP 401" in refused.rounds[0].results[0].content
    assert "***" in refused.rounds[0].results[0].content  # the echoed key, redacted
    assert found.citations[0].url == "https://f.example/1"
    assert report["rejected"] == 0  # every MCP request carried the key as its Bearer token
    replies = (refused.model_dump_json() + found.model_dump_json()).encode()
    assert leaks(replies) == [] and [leaks(body) for body in bodies if leaks(body)] == []
    logged = debug_log.read_text(encoding="utf-8")
    assert "mcp" in logged and "refused the call with HTTP 401" in logged  # the SDK and ours
    assert scan_tree(outputs) == {}


def test_the_scan_finds_the_key_when_it_is_there(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"prefix " + FAKE_KEY[33:].encode())
    assert scan_tree(tmp_path) == {"a": [FAKE_KEY[33:]]}
    assert REPO.is_dir()
