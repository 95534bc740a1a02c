"""MCP through the entry points as users run them: the CLI and the service as real processes,
their MCP servers as real children; and the suite's own check for leftover children."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from mcp_helpers import EXAMPLES, NOTES_SERVER, REPO, alive
from mcp_servers.leftovers import mcp_children
from mock_helpers import (
    assistant,
    chat,
    completion,
    exchange,
    function_tool,
    make_fixture,
    system,
    tool_call,
    tool_message,
    user,
)
from service_processes import Process, base_env

pytestmark = pytest.mark.e2e

TRAM = "// did the council approve the tram line extension?"


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def children_of(pid: int) -> set[int]:
    """MCP server processes whose parent is ``pid``."""
    found = set()
    for child in mcp_children():
        try:
            stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pid:
            found.add(child)
    return found


def test_the_leftover_check_sees_a_running_server_and_its_exit_on_eof() -> None:
    relative = NOTES_SERVER.relative_to(REPO)
    child = subprocess.Popen(
        [sys.executable, str(relative)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10  # /proc shows the new command line a moment after exec
        while child.pid not in mcp_children() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert child.pid in mcp_children()
    finally:
        assert child.stdin is not None
        child.stdin.close()  # what a parent that dies does to it: the server exits on EOF
        child.wait(20)
        assert child.stdout is not None
        child.stdout.close()
    assert child.pid not in mcp_children()


def test_offline_on_the_coding_endpoint_searches_through_the_mocks_mcp_server(
    tmp_path: Path,
) -> None:
    env = {**base_env(tmp_path), "OPENAI_BASE_URL": "https://api.z.ai/api/coding/paas/v4",
           "DATA_DIR": str(tmp_path / "data"), "PERSONAS_DIR": str(REPO / "personas")}  # fmt: skip
    done = cli(["chat", TRAM], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Yes. The city council approved the 4.2 km tram line")
    assert "Sources:" in done.stdout
    assert "[2] Tram extension: what happens next - https://transit.example.org/" in done.stdout
    assert done.stderr.count("offline:") == 1
    unknown = cli(["chat", "// something nobody recorded"], env)
    assert unknown.returncode == 1
    assert TRAM in unknown.stderr and "Nanaimo" not in unknown.stderr  # coding questions only


def test_personas_say_how_each_persona_searches(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PERSONAS_DIR": str(REPO / "personas")}
    general = cli(["personas"], env)
    coding = cli(["personas"], {**env, "OPENAI_BASE_URL": "https://api.z.ai/api/coding/paas/v4"})
    examples = cli(["personas"], {**env, "PERSONAS_DIR": str(EXAMPLES)})
    rows = {line.split("\t")[0]: line.split("\t")[2] for line in general.stdout.splitlines()}
    assert rows == {"helper": "web search: off", "scout": "web search: builtin"}
    assert "scout\t" in coding.stdout and "web search: mcp" in coding.stdout
    assert general.stderr.startswith("web search: WEB_SEARCH_MODE=auto -> builtin (the general")
    assert coding.stderr.startswith("web search: WEB_SEARCH_MODE=auto -> mcp (a Coding Plan")
    assert "/api/mcp/web_search_prime/mcp" in coding.stderr
    assert examples.stdout.strip().endswith("web search: off; MCP servers: notes")


def test_a_one_shot_chat_uses_the_example_personas_mcp_server_and_leaves_no_child(
    tmp_path: Path,
) -> None:
    tools = [function_tool(f"notes__{name}") for name in ("add_note", "list_notes")]
    calls = [tool_call("c1", "notes__add_note", {"text": "milk"})]
    first = chat(system(), user("remember milk"), tools=tools)
    then = chat(system(), user("remember milk"), assistant(None, calls),
                tool_message("c1", "Saved note 1: milk"), tools=tools)  # fmt: skip
    fixture = make_fixture(
        "notes_turn",
        exchange(first, completion(calls=calls)),
        exchange(then, completion("Saved: milk.")),
        persona="notes",
    )
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "notes_turn.json").write_text(fixture.to_json(), encoding="utf-8")
    args = ["mock", "--fixtures", str(fixtures), "--host", "127.0.0.1", "--port", "0"]
    with Process(args, tmp_path / "mock.log", base_env(tmp_path), tmp_path) as mock:
        env = {**base_env(tmp_path), "PERSONAS_DIR": str(EXAMPLES), "OPENAI_API_KEY": "k-123",
               "OPENAI_BASE_URL": f"{mock.url}/api/paas/v4", "DATA_DIR": str(tmp_path / "d"),
               "LLM_MAX_RETRIES": "0"}  # fmt: skip
        done = cli(["chat", "--persona", "notes", "--json", "remember milk"], env)
        report = httpx.get(f"{mock.url}/mock/report", timeout=30).json()
    assert done.returncode == 0, done.stderr
    # The second request carried the child's answer: the mock matched it exactly.
    assert report["fixtures"][0]["served"] == [1, 1] and report["unmatched"] == 0
    assert '"content": "Saved: milk."' in done.stdout
    assert (tmp_path / ".generic-framework-notes.json").read_text() == '["milk"]'


def test_the_service_starts_its_personas_servers_and_stops_them_on_shutdown(
    tmp_path: Path,
) -> None:
    env = {**base_env(tmp_path), "PERSONAS_DIR": str(EXAMPLES), "OPENAI_API_KEY": "k-123",
           "OPENAI_BASE_URL": "http://127.0.0.1:9/api/coding/paas/v4",
           "DATA_DIR": str(tmp_path / "data"), "LOG_LEVEL": "INFO"}  # fmt: skip
    bot = Process(["serve", "--host", "127.0.0.1", "--port", "0"], tmp_path / "bot.log", env, REPO)
    with bot:
        assert bot.proc is not None
        deadline = time.monotonic() + 30
        while not children_of(bot.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        (child,) = children_of(bot.proc.pid)
        models = httpx.get(f"{bot.url}/v1/models", timeout=30).json()
    assert "notes" in [m["id"] for m in models["data"]]
    log = (tmp_path / "bot.log").read_text()
    assert "web search: WEB_SEARCH_MODE=auto -> mcp (a Coding Plan endpoint)" in log
    assert "MCP server 'notes' started (stdio, session 1): 8 tool(s)" in log
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the MCP child outlived the service"
