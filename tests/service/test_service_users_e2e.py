"""Users and keys across real processes: three replicas on one PostgreSQL hold one user's
requests-per-minute limit and refuse a revoked key at once; two users made by the CLI never see
each other's turns; the trusted header is believed only from a trusted address (real sockets).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_processes import REPO, TOKEN, Process, bot_process, mock_process

from generic_framework.store import open_store
from generic_framework.store.users import Limits

pytestmark = pytest.mark.e2e

CAPITAL = "What is the capital of Canada?"


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def _ask(key: str) -> dict[str, Any]:
    return {
        "json": {"model": "scout", "messages": [{"role": "user", "content": CAPITAL}]},
        "headers": {"Authorization": f"Bearer {key}"},
    }


async def _burst(urls: list[str], key: str, count: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(
            *(
                client.post(f"{urls[i % len(urls)]}/v1/chat/completions", **_ask(key))
                for i in range(count)
            )
        )


async def test_three_replicas_hold_one_users_rpm_and_a_revocation(
    tmp_path: Path, postgres_server: Any
) -> None:
    url = postgres_server.create_database()
    store = open_store(url, sqlite_path="unused")
    try:
        user = await store.add_user("burst", limits=Limits(rpm=30))
        record, key = await store.create_key(user.id)
        with mock_process(tmp_path) as mock:
            bots = [bot_process(tmp_path / f"r{i}", mock, DATABASE_URL=url) for i in range(3)]
            for i, bot in enumerate(bots):
                (tmp_path / f"r{i}").mkdir()
                bot.start()
            try:
                urls = [bot.url for bot in bots]
                answers = await _burst(urls, key, 100)
                statuses = [r.status_code for r in answers]
                assert statuses.count(200) == 30, statuses
                assert statuses.count(429) == 70, statuses
                for refused in (r for r in answers if r.status_code == 429):
                    assert 1 <= int(refused.headers["retry-after"]) <= 60
                    assert refused.json()["error"]["code"] == "user_rpm"
                await store.revoke_key(record.id)
                async with httpx.AsyncClient(timeout=30) as client:
                    after = [
                        (await client.get(f"{u}/v1/me", headers=_ask(key)["headers"])).status_code
                        for u in urls
                    ]
                assert after == [401, 401, 401]
            finally:
                for bot in bots:
                    bot.stop()
    finally:
        await store.aclose()


def test_two_users_with_cli_made_keys_never_see_each_others_turns(tmp_path: Path) -> None:
    with mock_process(tmp_path) as mock, bot_process(tmp_path, mock) as bot:
        env = {**bot.env}
        keys = {}
        for name in ("alice", "bob"):
            made = _cli(env, "keys", "create", "--user", name)
            assert made.returncode == 0, made.stderr
            keys[name] = made.stdout.strip().splitlines()[-1]
        questions = {"alice": CAPITAL, "bob": "// what is 17% of 2,340?"}
        for name, key in keys.items():
            turn = httpx.post(
                f"{bot.url}/v1/conversations/chat-1/messages",
                json={"persona": "scout", "content": questions[name]},
                headers={"Authorization": f"Bearer {key}"},
                timeout=60,
            )
            assert turn.status_code == 200, turn.text
        for name, key in keys.items():
            auth = {"Authorization": f"Bearer {key}"}
            got = httpx.get(f"{bot.url}/v1/conversations/chat-1", headers=auth, timeout=10)
            texts = [m["content"] for m in got.json()["messages"] if m["role"] == "user"]
            own = questions[name].removeprefix("// ")
            assert texts == [own]
            listed = httpx.get(f"{bot.url}/v1/conversations", headers=auth, timeout=10).json()
            assert [c["id"] for c in listed["data"]] == ["chat-1"]
        admin = {"Authorization": f"Bearer {TOKEN}"}
        none = httpx.get(f"{bot.url}/v1/conversations", headers=admin, timeout=10).json()
        assert none["data"] == []


def _header_bot(tmp_path: Path, mock: Process, proxies: str) -> Process:
    tmp_path.mkdir()
    return bot_process(
        tmp_path,
        mock,
        BOT_TRUSTED_USER_HEADER="X-Forwarded-Email",
        BOT_TRUSTED_PROXIES=proxies,
        BOT_AUTO_CREATE_USERS="true",
    )


def test_the_trusted_header_is_believed_only_from_a_trusted_address(tmp_path: Path) -> None:
    header = {"X-Forwarded-Email": "carol@example.org"}
    with mock_process(tmp_path) as mock:
        # 127.0.0.1 is the trusted proxy: the header signs carol in (made on first sight).
        with _header_bot(tmp_path / "a", mock, "127.0.0.0/8") as bot:
            me = httpx.get(f"{bot.url}/v1/me", headers=header, timeout=10)
            assert me.status_code == 200, me.text
            assert me.json()["user"]["name"] == "carol@example.org"
            assert me.json()["via"] == "header"
            turn = httpx.post(
                f"{bot.url}/v1/conversations/c/messages",
                json={"persona": "scout", "content": CAPITAL},
                headers=header,
                timeout=60,
            )
            assert turn.status_code == 200
            other = httpx.get(
                f"{bot.url}/v1/conversations/c",
                headers={"X-Forwarded-Email": "dave@example.org"},
                timeout=10,
            )
            assert other.status_code == 404
        # The same request from an address outside BOT_TRUSTED_PROXIES: 401, not trust.
        with _header_bot(tmp_path / "b", mock, "10.0.0.0/8,192.168.0.0/16") as bot:
            refused = httpx.get(f"{bot.url}/v1/me", headers=header, timeout=10)
            assert refused.status_code == 401
            assert "BOT_TRUSTED_PROXIES" in refused.json()["error"]["message"]
            with_token = httpx.get(
                f"{bot.url}/v1/me",
                headers={**header, "Authorization": f"Bearer {TOKEN}"},
                timeout=10,
            )
            assert with_token.status_code == 401
            assert (
                httpx.get(
                    f"{bot.url}/v1/me", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
                ).json()["user"]["name"]
                == "admin"
            )
