"""``Idempotency-Key`` when the turn was stored but its answer was never kept: the stored turn
settles the key in its own transaction, so a retry after the lease lapsed gets the stored
answer and the turn does not run again. Real service processes killed with SIGKILL, the real
mock, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_processes import TOKEN, Process, bot_process, mock_process, mock_requests

pytestmark = pytest.mark.e2e

AUTH = {"Authorization": f"Bearer {TOKEN}"}
CAPITAL = "What is the capital of Canada?"

# The claim's finish refused by the database, as if the process had died right after its turn
# was stored: the answer is never kept, whatever the service does next.
_SQLITE_REFUSE = (
    "CREATE TRIGGER refuse_finish BEFORE UPDATE OF state ON idempotency_keys"
    " WHEN NEW.state = 'done' BEGIN SELECT RAISE(ABORT, 'finish refused'); END"
)
_PG_REFUSE = (
    "CREATE FUNCTION refuse_finish() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'finish refused'; END $$;"
    " CREATE TRIGGER refuse_finish BEFORE UPDATE ON idempotency_keys FOR EACH ROW"
    " WHEN (NEW.state = 'done') EXECUTE FUNCTION refuse_finish()"
)

Sql = Callable[[str], list[tuple[Any, ...]]]


@dataclass(frozen=True)
class Backend:
    env: dict[str, str]
    sql: Sql
    refuse_finish: str
    lapse_leases: str  # the lease's 30 s passed (moved back instead of waited for)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The bot's environment for the backend and a way to run SQL on its database."""
    if request.param == "sqlite":
        path = tmp_path / "data" / "conversations.sqlite3"

        def sqlite_sql(sql: str) -> list[tuple[Any, ...]]:
            with sqlite3.connect(path) as db:
                return db.execute(sql).fetchall()

        lapse = "UPDATE idempotency_keys SET lease_until = lease_until - 60"
        return Backend({}, sqlite_sql, _SQLITE_REFUSE, lapse)
    server = request.getfixturevalue("postgres_server")
    url = server.create_database()

    def postgres_sql(sql: str) -> list[tuple[Any, ...]]:
        return list(server.query(url, sql))

    lapse = "UPDATE idempotency_keys SET lease_until = lease_until - interval '60 seconds'"
    return Backend({"DATABASE_URL": url}, postgres_sql, _PG_REFUSE, lapse)


def _turns(bot: Process, cid: str) -> int:
    response = httpx.get(f"{bot.url}/v1/conversations/{cid}", headers=AUTH, timeout=10)
    return len(response.json()["turns"])


def _streamed_text(body: bytes) -> str:
    text = []
    for line in body.split(b"\n\n"):
        if line.startswith(b"data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def test_a_turn_stored_before_its_process_died_is_replayed_not_run_again(
    tmp_path: Path, backend: Backend
) -> None:
    sql = backend.sql
    turn = {"persona": "scout", "content": CAPITAL}
    chat = {
        "model": "scout",
        "messages": [{"role": "user", "content": CAPITAL}],
        "conversation_id": "streamed",
        "stream": True,
    }
    with mock_process(tmp_path, latency_ms=100) as mock:
        bot = bot_process(tmp_path, mock, **backend.env).start()
        try:
            assert (
                httpx.get(f"{bot.url}/v1/conversations", headers=AUTH, timeout=30).status_code
                == 200
            )
            sql(backend.refuse_finish)
            first = httpx.post(
                f"{bot.url}/v1/conversations/c1/messages",
                json=turn,
                headers={**AUTH, "Idempotency-Key": "k-json"},
                timeout=30,
            )
            assert first.status_code == 200 and "Ottawa" in first.json()["content"]
            streamed = httpx.post(
                f"{bot.url}/v1/chat/completions",
                json=chat,
                headers={**AUTH, "Idempotency-Key": "k-stream"},
                timeout=30,
            )
            assert streamed.status_code == 200 and streamed.text.endswith("data: [DONE]\n\n")
            assert sorted(sql("SELECT key, state FROM idempotency_keys")) == [
                ("k-json", "stored"),
                ("k-stream", "stored"),
            ]
            bot.kill()  # no clean-up code runs; the answers were never kept
            sql(backend.lapse_leases)
            ran = mock_requests(mock)
            bot.start()
            again = httpx.post(
                f"{bot.url}/v1/conversations/c1/messages",
                json=turn,
                headers={**AUTH, "Idempotency-Key": "k-json"},
                timeout=30,
            )
            assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
            body, replayed = first.json(), again.json()
            for field in ("conversation_id", "persona", "content", "citations", "usage", "model"):
                assert replayed[field] == body[field], field
            assert replayed["stop_reason"] == body["stop_reason"]
            assert len(replayed["rounds"]) == len(body["rounds"])
            stream_again = httpx.post(
                f"{bot.url}/v1/chat/completions",
                json=chat,
                headers={**AUTH, "Idempotency-Key": "k-stream"},
                timeout=30,
            )
            assert stream_again.status_code == 200
            assert stream_again.headers["idempotent-replayed"] == "true"
            assert stream_again.headers["content-type"].startswith("text/event-stream")
            assert stream_again.text.endswith("data: [DONE]\n\n")
            assert _streamed_text(stream_again.content) == _streamed_text(streamed.content)
            assert "Ottawa" in _streamed_text(stream_again.content)
            # Neither turn ran again: no model call, one stored turn each.
            assert mock_requests(mock) == ran
            assert _turns(bot, "c1") == 1 and _turns(bot, "streamed") == 1
        finally:
            bot.stop()
