"""``generic-framework usage``: its totals are the sum of the replies' usage, read back from the
stored turn records (the CLI as a real process, answering offline from the embedded mock)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from support import run_cli

QUESTIONS = (
    "// what's the weather in Nanaimo?",
    "// what is 17% of 2,340?",
    "What is the capital of Canada?",
)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), env)


def test_usage_json_totals_equal_the_sum_of_the_replies(env: dict[str, str]) -> None:
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


def test_usage_prices_from_the_operators_table(env: dict[str, str], tmp_path: Path) -> None:
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
