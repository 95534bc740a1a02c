"""``generic-framework usage``: its totals are the sum of the replies' usage, read back from the
stored turn records (the CLI as a real process). Billed turns are answered by a mock Z.AI server
given as the upstream with a key, as a real one would be; turns the embedded mock of the offline
demo answered (no key) are left out of the totals and counted on a line of their own."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import run_cli

from generic_framework.mock import MockServer

QUESTIONS = (
    "// what's the weather in Nanaimo?",
    "// what is 17% of 2,340?",
    "What is the capital of Canada?",
)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env)


@pytest.fixture
def upstream(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """``env`` with a key and a mock Z.AI server as its upstream: turns answered so are billed
    turns, as far as the CLI can tell (it is not the embedded mock of the offline demo)."""
    with MockServer() as server:
        yield {**env, "OPENAI_API_KEY": "a-real-looking-key", "OPENAI_BASE_URL": server.base_url}


def test_usage_json_totals_equal_the_sum_of_the_replies(upstream: dict[str, str]) -> None:
    env = upstream
    replies = []
    for number, question in enumerate(QUESTIONS):
        done = cli(env, "chat", "--json", "-c", f"u{number % 2}", question)
        assert done.returncode == 0, done.stderr
        replies.append(json.loads(done.stdout))
    done = cli(env, "usage", "--json", "--by", "model")
    assert done.returncode == 0, done.stderr
    total = json.loads(done.stdout)["total"]
    usage = [reply["usage"] for reply in replies]
    assert total["turns"] == len(QUESTIONS)
    assert total["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage) > 0
    assert total["completion_tokens"] == sum(u["completion_tokens"] for u in usage) > 0
    assert total["web_searches"] >= 1  # the Nanaimo answer came with web_search[] sources
    by_persona = json.loads(cli(env, "usage", "--json").stdout)
    assert [group["persona"] for group in by_persona["groups"]] == ["scout"]


def test_usage_prices_from_the_operators_table(upstream: dict[str, str], tmp_path: Path) -> None:
    env = upstream
    assert cli(env, "chat", "What is the capital of Canada?").returncode == 0
    prices = tmp_path / "prices.toml"
    prices.write_text(
        'currency = "USD"\n[models."glm-4.7"]\nprompt = 0.6\ncompletion = 2.2\n', encoding="utf-8"
    )
    done = cli(env, "usage", "--json", "--prices", str(prices))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["currency"] == "USD" and float(report["total"]["cost"]) > 0


def test_usage_refuses_a_bad_date_in_one_line(env: dict[str, str]) -> None:
    done = cli(env, "usage", "--since", "yesterday")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error:") and "2026-11-01" in done.stderr
    assert "Traceback" not in done.stderr


async def test_usage_by_user_and_for_one_user(env: dict[str, str]) -> None:
    from generic_framework.store import SQLiteStore, TurnRecord
    from generic_framework.store.users import conversation_key
    from generic_framework.wire.messages import AssistantMessage, UserMessage

    store = SQLiteStore(Path(env["DATA_DIR"]) / "conversations.sqlite3")
    try:
        alice = await store.add_user("alice")
        bob = await store.add_user("bob")
        turn = [UserMessage(content="q"), AssistantMessage(content="a")]
        for owner, asker, tokens in ((alice.id, alice.id, 10), (bob.id, bob.id, 20),
                                     (alice.id, "admin", 40), ("admin", "", 80)):  # fmt: skip
            record = TurnRecord(input="q", model="glm-4.7", prompt_tokens=tokens, user_id=asker)
            await store.append_turn(conversation_key(owner, "c"), "scout", turn, record)
    finally:
        await store.aclose()
    by_user = json.loads(cli(env, "usage", "--json", "--by", "user").stdout)
    assert {g["user"]: g["prompt_tokens"] for g in by_user["groups"]} == {
        "admin": 120,  # asked for alice's conversation (?user=), and a turn from before users
        "alice": 10,
        "bob": 20,
    }
    only = json.loads(cli(env, "usage", "--json", "--user", "bob").stdout)
    assert only["total"]["prompt_tokens"] == 20 and only["total"]["turns"] == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_offline_demo_turns_are_left_out_of_the_totals(
    upstream: dict[str, str], backend: str, request: pytest.FixtureRequest
) -> None:
    billed, offline = upstream, {k: v for k, v in upstream.items() if k != "OPENAI_API_KEY"}
    if backend == "postgres":
        server: Any = request.getfixturevalue("postgres_server")
        url = str(server.create_database())
        billed, offline = {**billed, "DATABASE_URL": url}, {**offline, "DATABASE_URL": url}
        assert cli(billed, "db", "upgrade").returncode == 0
    question = "What is the capital of Canada?"
    real = cli(billed, "chat", "--json", "-c", "billed", question)
    assert real.returncode == 0, real.stderr
    for conversation in ("demo-1", "demo-2"):  # no key: the embedded mock answers
        demo = cli(offline, "chat", "--json", "-c", conversation, question)
        assert demo.returncode == 0 and "offline: no OPENAI_API_KEY set" in demo.stderr
    forced = cli(billed, "chat", "--mock", "--json", "-c", "demo-3", QUESTIONS[0])
    assert forced.returncode == 0, forced.stderr

    done = cli(billed, "usage", "--json")
    assert done.returncode == 0, done.stderr
    report, usage = json.loads(done.stdout), json.loads(real.stdout)["usage"]
    assert report["offline_turns"] == 3
    assert report["total"]["turns"] == 1
    assert report["total"]["prompt_tokens"] == usage["prompt_tokens"] > 0
    assert report["total"]["completion_tokens"] == usage["completion_tokens"] > 0
    assert report["total"]["web_searches"] == 0  # the offline Nanaimo search is not billed
    assert [(g["persona"], g["turns"]) for g in report["groups"]] == [("scout", 1)]
    table = cli(billed, "usage")
    assert table.returncode == 0, table.stderr
    assert "offline demo turns: 3, not billed" in table.stdout
