"""``Idempotency-Key`` on the turn endpoints: real service processes, the real mock, SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_processes import TOKEN, Process, bot_process, mock_process, mock_requests
from support import until

from generic_framework.service.idempotency import answer_of, check_key, fingerprint, kept

pytestmark = pytest.mark.e2e

CAPITAL = "What is the capital of Canada?"
PERCENT = "// what is 17% of 2,340?"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _turn(bot: Process, cid: str, key: str | None, text: str = CAPITAL, **extra: Any) -> Any:
    headers = dict(AUTH) if key is None else {**AUTH, "Idempotency-Key": key}
    return httpx.post(
        f"{bot.url}/v1/conversations/{cid}/messages",
        json={"persona": "scout", "content": text, **extra},
        headers=headers,
        timeout=30,
    )


def _turns(bot: Process, cid: str) -> int:
    response = httpx.get(f"{bot.url}/v1/conversations/{cid}", headers=AUTH, timeout=30)
    return 0 if response.status_code == 404 else len(response.json()["turns"])


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Process]:
    with mock_process(tmp_path, latency_ms=300) as mock, bot_process(tmp_path, mock) as bot:
        yield bot


def test_a_retried_turn_returns_the_first_answer_and_stores_one_turn(stack: Process) -> None:
    bot = stack
    first = _turn(bot, "c1", "key-1")
    assert first.status_code == 200 and "Ottawa" in first.json()["content"]
    assert "idempotent-replayed" not in first.headers
    again = _turn(bot, "c1", "key-1")
    assert again.status_code == 200 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["content-type"] == first.headers["content-type"]
    assert _turns(bot, "c1") == 1
    # The same key with another request: 422, and nothing runs.
    other = _turn(bot, "c1", "key-1", PERCENT)
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert _turns(bot, "c1") == 1
    # A new key is a new turn; no key at all, as before.
    assert _turn(bot, "c1", "key-2").status_code == 200
    assert _turn(bot, "c1", None).status_code == 200
    assert _turns(bot, "c1") == 3
    bad = _turn(bot, "c1", "has space")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_idempotency_key"
    # An invalid request claims nothing: fixed, it runs under the same key.
    refused = _turn(bot, "c2", "key-3", "")
    assert refused.status_code == 400
    assert _turn(bot, "c2", "key-3").status_code == 200


def test_chat_completions_replay_the_same_completion(stack: Process) -> None:
    bot = stack
    ask = {"model": "scout", "messages": [{"role": "user", "content": CAPITAL}]}
    url = f"{bot.url}/v1/chat/completions"
    headers = {**AUTH, "Idempotency-Key": '"a-quoted-key"'}
    first = httpx.post(url, json=ask, headers=headers, timeout=30)
    again = httpx.post(url, json=ask, headers=headers, timeout=30)
    assert first.status_code == again.status_code == 200
    # The completion's id is fresh for every run: the same id means the same answer, not a rerun.
    assert again.json()["id"] == first.json()["id"]
    fresh = httpx.post(url, json=ask, headers={**AUTH, "Idempotency-Key": "other"}, timeout=30)
    assert fresh.json()["id"] != first.json()["id"]
    # Keys are per caller: without the token's caller, the same key is another caller's.
    anonymous = httpx.post(url, json=ask, headers={"Idempotency-Key": "a"}, timeout=30)
    assert anonymous.status_code == 401


def test_the_openai_client_retries_a_409_and_gets_the_first_answer(tmp_path: Path) -> None:
    # OpenAI's client retries a 409 after its Retry-After: a duplicate sent while the first is
    # still running ends with the first one's completion, and the turn ran once.
    import openai

    with mock_process(tmp_path, latency_ms=2000) as mock, bot_process(tmp_path, mock) as bot:
        client = openai.OpenAI(api_key=TOKEN, base_url=f"{bot.url}/v1", max_retries=3)
        ask: dict[str, Any] = {
            "model": "scout",
            "messages": [{"role": "user", "content": CAPITAL}],
            "extra_headers": {"Idempotency-Key": "sdk-key"},
        }
        ids: dict[str, str] = {}
        first = threading.Thread(
            target=lambda: ids.update(first=client.chat.completions.create(**ask).id)
        )
        first.start()
        until(lambda: mock_requests(mock) == 1, "the first is waiting for the mock's answer")
        with httpx.Client(timeout=30) as raw:
            busy = raw.post(
                f"{bot.url}/v1/chat/completions",
                json={"model": "scout", "messages": ask["messages"]},
                headers={**AUTH, "Idempotency-Key": "sdk-key"},
            )
        ids["second"] = client.chat.completions.create(**ask).id
        first.join(30)
    assert busy.status_code == 409
    assert ids["first"] == ids["second"]
    log = (tmp_path / "bot.log").read_text()
    assert log.count('POST /v1/chat/completions HTTP/1.1" 409') >= 2  # the raw one and the SDK's


def _stream(bot: Process, cid: str, key: str, out: dict[str, Any]) -> None:
    with httpx.stream(
        "POST",
        f"{bot.url}/v1/conversations/{cid}/messages",
        json={"persona": "scout", "content": PERCENT, "stream": True},
        headers={**AUTH, "Idempotency-Key": key},
        timeout=30,
    ) as response:
        out["status"] = response.status_code
        lines = response.iter_bytes()
        head = next(lines)  # the opening chunk: the turn is running
        started = out.get("started")
        if isinstance(started, threading.Event):
            started.set()
        out["body"] = head + b"".join(lines)


@pytest.fixture
def slow_stack(tmp_path: Path) -> Iterator[Process]:
    """A mock that answers after 1.5 s: a turn runs long enough for a retry to find it
    running on a busy machine (once stored, a retry is answered from the stored turn)."""
    with mock_process(tmp_path, latency_ms=1500) as mock, bot_process(tmp_path, mock) as bot:
        yield bot


def test_a_streamed_turn_is_409_while_running_then_replayed_as_the_same_stream(
    slow_stack: Process,
) -> None:
    bot = slow_stack
    first: dict[str, Any] = {"started": threading.Event()}
    runner = threading.Thread(target=_stream, args=(bot, "s1", "stream-key", first))
    runner.start()
    assert first["started"].wait(10)
    deadline = time.monotonic() + 10
    busy = None
    while busy is None and time.monotonic() < deadline:
        response = _turn(bot, "s1", "stream-key", PERCENT, stream=True)
        if response.status_code == 409:
            busy = response
        time.sleep(0.05)
    runner.join(30)
    assert busy is not None, "the running stream's key was never seen in use"
    assert busy.json()["error"]["code"] == "idempotency_key_in_use"
    assert 1 <= int(busy.headers["retry-after"]) <= 5
    assert first["status"] == 200 and first["body"].endswith(b"data: [DONE]\n\n")
    with httpx.stream(
        "POST",
        f"{bot.url}/v1/conversations/s1/messages",
        json={"persona": "scout", "content": PERCENT, "stream": True},
        headers={**AUTH, "Idempotency-Key": "stream-key"},
        timeout=30,
    ) as replay:
        assert replay.headers["content-type"].startswith("text/event-stream")
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.read() == first["body"].replace(b": keep-alive\n\n", b"")
    assert _turns(bot, "s1") == 1


def test_a_stream_the_client_left_releases_its_key(stack: Process) -> None:
    bot = stack
    with httpx.stream(
        "POST",
        f"{bot.url}/v1/conversations/left/messages",
        json={"persona": "scout", "content": PERCENT, "stream": True},
        headers={**AUTH, "Idempotency-Key": "left-key"},
        timeout=30,
    ) as response:
        assert next(response.iter_lines()).startswith("data: ")
    # The turn was cancelled and stored nothing: the retry runs it (once the key is released;
    # the deadline bounds a hang only).
    deadline = time.monotonic() + 30
    while (again := _turn(bot, "left", "left-key", PERCENT)).status_code == 409:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert again.status_code == 200
    assert _turns(bot, "left") == 1


@pytest.mark.slow
def test_a_replica_killed_mid_turn_holds_its_key_until_the_lease_lapses(tmp_path: Path) -> None:
    with mock_process(tmp_path, latency_ms=800) as mock:
        bot = bot_process(tmp_path, mock).start()
        try:
            with httpx.stream(
                "POST",
                f"{bot.url}/v1/conversations/crash/messages",
                json={"persona": "scout", "content": PERCENT, "stream": True},
                headers={**AUTH, "Idempotency-Key": "crash-key"},
                timeout=30,
            ) as response:
                # The iterator is kept: dropping it would close the connection, and the service
                # would release the key of a turn its client left before the kill lands.
                lines = response.iter_lines()
                assert next(lines).startswith("data: ")
                bot.kill()  # mid-turn: no clean-up code runs
            bot.start()
            held = _turn(bot, "crash", "crash-key", PERCENT, stream=True)
            assert held.status_code == 409 and int(held.headers["retry-after"]) >= 1
            # The lease's 30 s pass (moved back in the file instead of waited for).
            with sqlite3.connect(tmp_path / "data" / "conversations.sqlite3") as db:
                db.execute("UPDATE idempotency_keys SET lease_until = lease_until - 60")
            taken = _turn(bot, "crash", "crash-key", PERCENT, stream=True)
            assert taken.status_code == 200 and taken.text.endswith("data: [DONE]\n\n")
            assert _turns(bot, "crash") == 1
        finally:
            bot.stop()


@pytest.mark.slow
def test_two_services_on_one_postgresql_run_a_raced_key_once(
    tmp_path: Path, postgres_server: Any
) -> None:
    url = postgres_server.create_database()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        mock_process(tmp_path, latency_ms=400) as mock,
        bot_process(tmp_path / "a", mock, DATABASE_URL=url) as one,
        bot_process(tmp_path / "b", mock, DATABASE_URL=url) as two,
    ):
        for round_ in range(3):
            key, cid = f"race-{round_}", f"pg-{round_}"
            results: list[httpx.Response] = []
            barrier = threading.Barrier(8)

            def send(bot: Process) -> None:
                barrier.wait()
                results.append(_turn(bot, cid, key))

            threads = [threading.Thread(target=send, args=(b,)) for b in (one, two) * 4]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            # One runs; the others get 409 while it runs, or its answer once it has finished
            # (on a busy machine some arrive after the 400 ms turn): never a second run.
            statuses = sorted(r.status_code for r in results)
            assert len(statuses) == 8 and set(statuses) <= {200, 409}, statuses
            answered = [r for r in results if r.status_code == 200]
            ran = answered[0]
            assert all(r.content == ran.content for r in answered)
            for bot in (one, two):
                replay = _turn(bot, cid, key)
                assert replay.status_code == 200 and replay.content == ran.content
            assert _turns(one, cid) == 1
        rows = postgres_server.query(url, "SELECT count(*), min(state) FROM idempotency_keys")
        assert rows == [(3, "done")]


def test_key_header_rules() -> None:
    assert check_key(' "8e03978e-40d5" ') == "8e03978e-40d5"
    assert check_key("abc") == "abc"
    for bad in ("", '""', "a b", "x" * 256, "é"):
        try:
            check_key(bad)
        except ValueError as exc:
            assert "Idempotency-Key" in str(exc)
        else:
            raise AssertionError(bad)


def test_fingerprint_ignores_json_spacing_and_key_order_only() -> None:
    a = fingerprint("POST", "/v1/x", b'{"a": 1, "b": [1, 2]}')
    assert a == fingerprint("POST", "/v1/x", b'{"b":[1,2],"a":1}')
    assert a != fingerprint("POST", "/v1/x", b'{"a": 1, "b": [2, 1]}')
    assert a != fingerprint("POST", "/v1/y", b'{"a": 1, "b": [1, 2]}')
    assert fingerprint("POST", "/v1/x", b"not json") != fingerprint("POST", "/v1/x", b"not  json")


def test_a_kept_answer_reads_back_whole() -> None:
    body = b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    assert answer_of(kept(200, "text/event-stream; charset=utf-8", body)) == (
        200,
        "text/event-stream; charset=utf-8",
        body,
    )
    assert answer_of(kept(502, "application/json", b"{}")) == (502, "application/json", b"{}")
    # An answer kept before the status went with it: its body alone.
    assert answer_of(b'{"id": "x"}') == (200, "application/json", b'{"id": "x"}')
    assert answer_of(body) == (200, "text/event-stream", body)


async def test_a_store_failure_answers_without_waiting_for_the_key_release() -> None:
    # The store failed the turn (it hangs): the error goes out at once, and the key's release,
    # which would wait on the same store for another bound, lands in the background.
    from types import SimpleNamespace

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from generic_framework.errors import StoreUnavailableError
    from generic_framework.service.idempotency import idempotent
    from generic_framework.store.keys import Claim

    gate, done = asyncio.Event(), asyncio.Event()
    released: list[str] = []

    class HungStore:
        async def claim_key(self, *args: Any, **kwargs: Any) -> Claim:
            return Claim("run", "token")

        async def release_key(self, owner: str, key: str, token: str) -> None:
            await gate.wait()
            released.append(key)
            done.set()

    async def failing(claim: Any) -> Response:
        raise StoreUnavailableError("the conversation database did not answer")

    async def endpoint(request: Request) -> Response:
        return await idempotent(request, failing, lambda reply: Response())

    app = Starlette(routes=[Route("/turn", endpoint, methods=["POST"])])
    app.state.service = SimpleNamespace(runtime=SimpleNamespace(claims=HungStore()))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        with pytest.raises(StoreUnavailableError):
            await asyncio.wait_for(
                client.post("/turn", json={}, headers={"Idempotency-Key": "k"}), 5
            )
    assert released == []
    gate.set()
    await asyncio.wait_for(done.wait(), 30)
    assert released == ["k"]
