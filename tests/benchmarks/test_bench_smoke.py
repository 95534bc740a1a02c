"""Smoke test of the benchmark harness: correctness only, tiny sizes, no timing asserts.

The scripted server runs as a real process on 127.0.0.1; the project's own clients run the job
in-process (fast), and one run goes through the fresh-process plumbing the harness uses.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from benchmarks import (
    instructions,
    job,
    postgres,
    run_client,
    service_bench,
    startup,
    store_alone,
)
from benchmarks.__main__ import scenarios
from benchmarks.clients import CLIENTS, typed_httpx
from benchmarks.report import Verdict, render, verdicts
from benchmarks.runner import ClientRun, Server
from benchmarks.scenarios import Config, Row
from benchmarks.server import chunk_frame, completion_body

OWN_CLIENTS = ("raw_httpx", "typed_httpx", "glmclient", "persona")


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server = Server()
    with server.running() as url:
        yield url


async def _driver(name: str, url: str, **options: object) -> run_client.Driver:
    module = __import__(CLIENTS[name].module, fromlist=["open_driver"])
    driver: run_client.Driver = await module.open_driver(url, options)
    return driver


async def test_the_server_scripts_a_tool_call_then_the_answer(server_url: str) -> None:
    body = {"model": job.MODEL, "messages": [{"role": "user", "content": "hi"}], "tools": job.TOOLS}
    async with httpx.AsyncClient(timeout=30) as http:
        first = (await http.post(f"{server_url}/chat/completions", json=body)).json()
        call = first["choices"][0]["message"]["tool_calls"][0]
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
        body["messages"] += [
            first["choices"][0]["message"],
            {"role": "tool", "tool_call_id": call["id"], "content": "rain"},
        ]
        second = (await http.post(f"{server_url}/chat/completions", json=body)).json()
    assert second["choices"][0]["message"]["content"] == "Answer: rain"


async def test_the_server_answers_a_request_without_tools_at_once(server_url: str) -> None:
    body = {"model": job.MODEL, "messages": [{"role": "user", "content": "hi there"}]}
    async with httpx.AsyncClient(timeout=30) as http:
        answer = (await http.post(f"{server_url}/chat/completions", json=body)).json()
    assert answer["choices"][0]["message"]["content"] == "Answer: hi there"


async def test_the_server_answers_a_request_that_is_not_a_chat_with_404(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        probe = await http.get(f"{server_url}/models")
        body = {"model": job.MODEL, "messages": [{"role": "user", "content": "still there"}]}
        answer = await http.post(f"{server_url}/chat/completions", json=body)
    assert probe.status_code == 404
    assert answer.json()["choices"][0]["message"]["content"] == "Answer: still there"


def test_stream_frames_follow_the_glm_layout() -> None:
    middle = json.loads(chunk_frame("r1", {"role": "assistant", "content": "x"})[6:])
    last = json.loads(chunk_frame("r1", {"role": "assistant", "content": ""}, "stop")[6:])
    assert "finish_reason" not in middle["choices"][0]
    assert "usage" not in middle
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["total_tokens"] > 0
    whole = json.loads(completion_body({"role": "assistant", "content": "x"}, "stop", "r2"))
    assert whole["id"] == whole["request_id"] == "r2"


def test_the_typed_floor_validates_each_response_into_its_models() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call], "reasoning": "kept"}
    parsed = typed_httpx.Completion.model_validate_json(completion_body(message, "tool_calls", "r"))
    assert isinstance(parsed.usage, typed_httpx.Usage) and parsed.usage.total_tokens > 0
    calls = parsed.choices[0].message.tool_calls
    assert calls is not None and isinstance(calls[0], typed_httpx.ToolCall)
    dumped = parsed.choices[0].message.model_dump(exclude_none=True)
    assert dumped == {"role": "assistant", "tool_calls": [call], "reasoning": "kept"}
    broken = completion_body({"role": "assistant", "tool_calls": [{"id": "c1"}]}, "stop", "r")
    with pytest.raises(ValidationError):
        typed_httpx.Completion.model_validate_json(broken)


@pytest.mark.parametrize("name", OWN_CLIENTS)
async def test_each_own_client_completes_the_job(server_url: str, name: str) -> None:
    driver = await _driver(name, server_url)
    try:
        result = await run_client.sequential(driver, 2, 1)
    finally:
        await driver.aclose()
    assert result["cpu_per_conv"] > 0


@pytest.mark.parametrize("name", OWN_CLIENTS)
async def test_each_own_client_streams_and_sees_the_stamp(name: str) -> None:
    with Server(chunks=3).running() as url:
        driver = await _driver(name, url)
        try:
            result = await run_client.stream(driver, 1, 1)
        finally:
            await driver.aclose()
    assert result["first_delta"] is not None
    assert result["deltas"] == 3


async def test_the_persona_with_a_conversation_loads_and_stores_each_turn(server_url: str) -> None:
    driver = await _driver("persona", server_url, conversation=True)
    try:
        result = await run_client.sequential(driver, 2, 1)
        stored = await driver.runtime.store.get("bench-conversation")  # type: ignore[attr-defined]
    finally:
        await driver.aclose()
    assert result["cpu_per_conv"] > 0
    assert stored is not None
    assert len({m.turn for m in stored}) == 3  # the warm-up turn and the two measured ones


@pytest.fixture(scope="module")
def harness_postgres() -> Iterator[str]:
    """The harness's own throwaway PostgreSQL server (``benchmarks.postgres``), as its URL."""
    why_not = postgres.unavailable()
    if why_not is not None:
        pytest.skip(why_not)
    with postgres.throwaway() as database_url:
        yield database_url


async def test_the_persona_stores_its_turns_in_the_harness_s_own_postgresql(
    server_url: str, harness_postgres: str
) -> None:
    driver = await _driver("persona", server_url, conversation=True, database_url=harness_postgres)
    try:
        result = await run_client.sequential(driver, 2, 1)
        store = driver.runtime.store  # type: ignore[attr-defined]
        stored = await store.get(driver.conversation_id)  # type: ignore[attr-defined]
    finally:
        await driver.aclose()
    assert type(store).__name__ == "PostgresStore"
    assert result["cpu_per_conv"] > 0
    assert stored is not None
    assert len({m.turn for m in stored}) == 3


async def test_the_stored_floor_keeps_each_turn_and_sends_the_last_one_along(
    server_url: str, harness_postgres: str
) -> None:
    import psycopg

    driver = await _driver("stored_httpx", server_url, database_url=harness_postgres)
    sent: list[int] = []
    post = driver._post  # type: ignore[attr-defined]

    async def counted(messages: list[dict[str, object]]) -> object:
        sent.append(len(messages))
        return await post(messages)

    driver._post = counted  # type: ignore[attr-defined]
    locks = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    try:
        result = await run_client.sequential(driver, 2, 1)
        # Read while the driver's session is open (closing it would free its locks anyway).
        async with await psycopg.AsyncConnection.connect(harness_postgres) as conn:
            rows = await (await conn.execute("SELECT turn, messages FROM floor_turns")).fetchall()
            held = await (await conn.execute(locks)).fetchone()
    finally:
        await driver.aclose()
    assert result["cpu_per_conv"] > 0
    assert sorted(turn for turn, _ in rows) == [1, 2, 3]
    assert all(
        [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        for _, messages in rows
    )
    # The first turn sends system + user, then + its tool round; later ones carry the turn before.
    assert sent == [2, 4, 6, 8, 6, 8]
    assert held == (0,)  # every turn gave the lock back


def test_the_store_alone_times_both_stores_and_each_keeps_every_turn(
    harness_postgres: str,
) -> None:
    import psycopg

    result = store_alone.measure(harness_postgres, turns=3, rounds=2, warmup=1)
    assert result["floor_us"] > 0 and result["library_us"] > 0
    assert len(result["floor_rounds_us"]) == len(result["library_rounds_us"]) == 2
    assert set(result["steps_us"]) == set(store_alone.STEPS)
    assert sum(result["steps_us"].values()) <= result["library_us"] * 1.5
    assert "x the floor's statements" in store_alone.render(result)
    with psycopg.connect(harness_postgres) as conn:
        floor = conn.execute(
            "SELECT conversation, count(*) FROM floor_turns WHERE conversation LIKE 'alone-%'"
            " GROUP BY conversation"
        ).fetchall()
        library = conn.execute(
            "SELECT conversation_id, count(*), min(role), max(seq) FROM messages"
            " WHERE conversation_id LIKE 'alone-%' GROUP BY conversation_id"
        ).fetchall()
        held = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
    # Each round: the warm-up turn and three timed ones, four messages each, locks given back.
    assert sorted(n for _, n in floor) == [4, 4]
    assert sorted((n, role, seq) for _, n, role, seq in library) == [(16, "assistant", 3)] * 2
    assert held == (0,)


async def test_persona_runs_four_slow_tools_in_one_round() -> None:
    with Server(calls=4).running() as url:
        driver = await _driver("persona", url, slow_tool=True)
        try:
            answer = await driver.converse()
        finally:
            await driver.aclose()
    assert answer.count("sunny, 21 C in") == 4


def test_a_wrong_answer_fails_the_run() -> None:
    with pytest.raises(AssertionError):
        job.check("Answer: cloudy")
    assert job.strip_stamp("@123;Answer: x") == "Answer: x"
    assert job.first_text_delay("no stamp") is None


def test_a_fresh_process_run_reports_json(server_url: str) -> None:
    result = ClientRun("glmclient", "sequential", 2, 1).once(sys.executable, server_url)
    assert result["ok"], result
    assert result["cpu_per_conv"] > 0
    assert result["spawn_wall"] > 0


def test_a_first_answer_run_reports_its_import_and_first_conversation(server_url: str) -> None:
    result = ClientRun("persona", "first_answer", 1, 0).once(sys.executable, server_url)
    assert result["ok"], result
    assert result["import"] > 0
    assert result["first"] > 0
    assert result["spawn_wall"] > result["import"] + result["first"]


def test_the_public_import_is_timed_as_written() -> None:
    assert startup._statement(startup.PUBLIC_IMPORT) == startup.PUBLIC_IMPORT
    assert startup._statement("httpx") == "import httpx"
    assert startup._import_time(sys.executable, startup.PUBLIC_IMPORT) is not None


@pytest.mark.e2e
def test_the_service_scenario_runs_every_server_at_tiny_sizes(tmp_path: Path) -> None:
    rows = service_bench.service(Config.quick_config(str(tmp_path)))
    found = {row.key: row for row in rows}
    kinds = ("floor", "floor-default", "floor-sharded", "service")
    assert set(found) == {f"{kind}_{mode}" for kind in kinds for mode in ("json", "stream")}
    for row in rows:
        assert row.note == "", row.note
        assert row.metrics["cpu_ms"] and row.metrics["rps"] and row.metrics["p99_ms"]
        assert row.metrics["rss_mb"]
    assert found["service_json"].metrics["added_p99_ms"] is not None


def test_only_takes_scenario_names_and_numbers() -> None:
    assert scenarios("service") == {"8"}
    assert scenarios("1, startup,8") == {"1", "5", "8"}
    with pytest.raises(SystemExit, match="unknown scenario 'servce'"):
        scenarios("servce")


def test_a_failing_fresh_process_run_is_reported_not_counted() -> None:
    result = ClientRun("raw_httpx", "sequential", 1, 0, timeout=60).once(
        sys.executable, "http://127.0.0.1:9/none"
    )
    assert result["ok"] is False
    assert "ConnectError" in result["error"]


def _row(scenario: str, key: str, **medians: float) -> Row:
    return Row(scenario, key, key, {m: {"median": v} for m, v in medians.items()})


def test_the_postgresql_row_shows_the_stored_floor_beside_raw_httpx() -> None:
    rows = [
        _row("1", "raw_httpx", cpu_ms=2.0),
        _row("1", "persona", cpu_ms=2.1),
        _row("1", "stored_httpx", cpu_ms=3.0),
        _row("1", "persona_conversation_pg", cpu_ms=3.3),
    ]
    found = {v.target: v for v in verdicts(rows)}
    on_postgres = found["1. persona with a conversation_id (PostgreSQL) CPU <= 1.6x raw httpx"]
    assert on_postgres.met is False  # the target stays against raw httpx
    assert on_postgres.measured == "1.65x; 1.10x the stored floor (1.50x raw)"
    assert not any("below every peer" in target for target in found)  # the floor is no peer


def test_verdicts_compare_medians_with_the_targets() -> None:
    rows = [
        _row("1", "raw_httpx", cpu_ms=2.0),
        _row("1", "typed_httpx", cpu_ms=2.1),
        _row("1", "persona", cpu_ms=2.2),
        _row("1", "persona_conversation", cpu_ms=2.6),
        Row("1", "persona_conversation_pg", "pg", {}, "not measured: no server binaries"),
        _row("1", "openai", cpu_ms=5.0),
        _row("2", "raw_httpx", wall_s=4.0, rss_mb=50.0),
        _row("2", "raw_httpx_1000", wall_s=3.5, rss_mb=50.0),
        _row("2", "typed_httpx", wall_s=4.0, rss_mb=60.0),
        _row("2", "glmclient", wall_s=3.0, rss_mb=70.0),
        _row("5", "import:generic_framework", ms=20.0),
        _row("5", f"import:{startup.PUBLIC_IMPORT}", ms=140.0),
        _row("5", "import:zai", ms=130.0),
        _row("5", "first:raw_httpx", ms=200.0),
        _row("5", "first:typed_httpx", ms=250.0),
        _row("5", "first:persona", ms=280.0),
        _row("5", "first:glmclient", ms=300.0),
        _row("5", "firstconv:raw_httpx", ms=30.0),
        _row("5", "firstconv:persona", ms=45.0),
        _row("8", "floor_json", cpu_ms=2.0),
        _row("8", "service_json", cpu_ms=2.9),
    ]
    found = {v.target: v for v in verdicts(rows)}
    plain = found["1. persona CPU <= 1.15x raw httpx"]
    assert plain.met is True
    assert plain.measured == "1.10x; 1.05x the typed floor (1.05x raw)"
    assert found["1. persona with a conversation_id (SQLite) CPU <= 1.25x raw httpx"].met is False
    on_postgres = found["1. persona with a conversation_id (PostgreSQL) CPU <= 1.6x raw httpx"]
    assert on_postgres.met is None
    assert on_postgres.measured == "not measured: no server binaries"
    assert found["1. persona CPU below every peer"].met is True
    assert found["2. glmclient: wall <= 0.8x raw httpx's best pool"].met is False  # 3.0 / 3.5
    rss = found["2. glmclient: peak RSS <= 1.25x raw httpx"]
    assert rss.met is False
    assert rss.measured == "1.40x; 1.17x the typed floor (1.20x raw)"
    # Start-up against the typed floor, both floors measured in the same run: 1.12x and 1.20x.
    assert found["5. persona: spawn to first answer <= 1.15x the typed floor"].met is True
    assert found["5. glmclient: spawn to first answer <= 1.15x the typed floor"].met is False
    assert (
        "1.40x raw httpx"
        in found["5. persona: spawn to first answer <= 1.15x the typed floor"].measured
    )
    assert found["5. import generic_framework <= 150 ms"].met is True
    assert found[f"5. `{startup.PUBLIC_IMPORT}` <= 150 ms"].met is True
    assert found["5. the public API imports faster than zai-sdk"].met is False
    assert found["5. persona: first conversation <= raw httpx's + 20 ms"].met is True
    assert found["8. service (json): CPU per request <= 1.5x the floor"].met is True
    text = render(rows, "# run\n", "")
    assert "**not met**" in text
    assert isinstance(next(iter(found.values())), Verdict)


def test_the_instruction_rows_are_checked_against_both_floors() -> None:
    rows = [
        _row("9", "chat:raw_httpx", minstr=5.7),
        _row("9", "chat:typed_httpx", minstr=5.8),
        _row("9", "chat:persona", minstr=5.8),
        _row("9", "chat:persona_conversation", minstr=7.3),
        _row("9", "first:raw_httpx", minstr=1300.0),
        _row("9", "first:typed_httpx", minstr=1700.0),
        _row("9", "first:persona", minstr=1900.0),
    ]
    found = {v.target: v for v in verdicts(rows)}
    assert found["9. persona: instructions per chat <= 1.15x raw httpx"].met is True
    stored = found[
        "9. persona with a conversation_id (SQLite): instructions per chat <= 1.25x raw httpx"
    ]
    assert stored.met is False  # 7.3 / 5.7 = 1.28x
    assert stored.measured.startswith("1.28x; 1.26x the typed floor")
    first = found["9. persona: instructions to the first answer <= 1.15x the typed floor"]
    assert first.met is True
    assert first.measured == "1.12x (1900 vs 1700); 1.46x raw httpx (1300)"
    assert "9. glmclient: instructions to the first answer <= 1.15x the typed floor" not in found


def test_without_valgrind_the_instruction_rows_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None)
    rows = instructions.instructions(Config.quick_config("unused"))
    assert {r.key for r in rows} >= {"chat:persona_conversation", "first:typed_httpx"}
    assert all(r.skipped and r.note == "not measured: valgrind is not installed" for r in rows)


def test_instructions_per_chat_are_the_difference_of_two_processes() -> None:
    row = Row("9", "chat:persona", "persona")
    instructions._keep(row, [2_500_000_000, 1_300_000_000], 200)
    assert row.metrics["minstr"] == {"median": 6.0, "n": 1}
    failed = Row("9", "chat:persona", "persona")
    instructions._keep(failed, [2_500_000_000, "exit 1: boom"], 200)
    assert failed.skipped and failed.note == "failed: exit 1: boom"
