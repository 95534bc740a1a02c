"""The replay runner: every bundled fixture through the real Persona, and failures reported."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generic_framework.config import Settings
from generic_framework.mock import load_fixtures
from generic_framework.mock.fixture import Fixture, FixtureError, bundled_fixtures_dir
from generic_framework.recording.replay import (
    ReplayResult,
    default_replay_paths,
    render_table,
    replay_fixtures,
    replay_main,
)
from generic_framework.runtime import Runtime

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("no_retry_waits")


def tampered(original_name: str, **changes: object) -> Fixture:
    (original,) = [f for f in load_fixtures() if f.name == original_name]
    data = original.model_dump(mode="json")
    data.update(changes)
    return Fixture.model_validate(data)


@pytest.mark.parametrize("personas", ["file", "fixture"])
async def test_every_bundled_fixture_replays_through_the_real_persona(
    personas: str, tmp_path: Path
) -> None:
    directory = REPO / "personas" if personas == "file" else tmp_path
    fixtures = load_fixtures()
    results = await replay_fixtures(fixtures, settings=Settings.defaults(personas_dir=directory))
    assert len(results) == len(fixtures) >= 15
    assert {r.fixture: r.problems for r in results if not r.ok} == {}
    sources = {r.fixture: r.persona for r in results}
    assert sources.pop("web_search_client_mode") == "fixture"  # no persona file of that name
    assert sources.pop("web_reader_client_mode") == "fixture"
    # The persona with memory has its file among the examples (the next test).
    assert sources.pop("keeper_remember") == sources.pop("keeper_recall") == "fixture"
    assert set(sources.values()) == {personas}
    by_name = {r.fixture: r for r in results}
    assert by_name["sequential_rounds"].rounds == 4
    assert by_name["runaway_tool_calls"].rounds == 5


async def test_the_memory_demo_replays_with_its_persona_file() -> None:
    fixtures = [f for f in load_fixtures() if f.persona == "keeper"]
    settings = Settings.defaults(personas_dir=REPO / "personas" / "examples")
    results = await replay_fixtures(fixtures, settings=settings)
    assert sorted((r.fixture, r.ok, r.persona, r.problems) for r in results) == [
        ("keeper_recall", True, "file", []),
        ("keeper_remember", True, "file", []),
    ]


async def test_a_wrong_reply_and_a_wrong_request_are_reported() -> None:
    wrong_reply = tampered("plain_answer", expected={"content": "Paris.", "rounds": 2})
    data = tampered("function_two_rounds").model_dump(mode="json")
    data["exchanges"][1]["request"]["body"]["messages"][3]["content"] = '{"result": 1}'
    wrong_request = Fixture.model_validate(data)
    results = await replay_fixtures([wrong_reply, wrong_request], settings=Settings.defaults())
    assert [r.ok for r in results] == [False, False]
    assert results[0].problems == [
        "content: expected 'Paris.', got 'The capital of Canada is Ottawa, in the province of "
        "Ontario.'",
        "rounds: expected 2, got 1",
    ]
    problems = results[1].problems
    assert problems[0].startswith("a request had no recorded answer: messages[3].content")
    assert problems[1] == "exchanges reached in the order [0], expected [0, 1]"
    assert problems[2].startswith("the turn failed: BadRequestError")


async def test_an_unexpected_success_and_a_wrong_error_are_reported() -> None:
    success = tampered("plain_answer", expected={"error": {"type": "RateLimitError"}})
    wrong = tampered("insufficient_balance", expected={"error": {"type": "AuthenticationError",
                                                                 "code": "1002"}})  # fmt: skip
    results = await replay_fixtures([success, wrong], settings=Settings.defaults())
    assert results[0].problems == ["expected RateLimitError but the turn succeeded"]
    assert (
        results[1]
        .problems[0]
        .startswith("expected AuthenticationError, got InsufficientBalanceError")
    )
    assert results[1].problems[1] == "expected error code 1002, got 1113"


async def test_a_fixture_with_unknown_tools_and_no_persona_file_is_explained(
    tmp_path: Path,
) -> None:
    data = tampered("function_two_rounds").model_dump(mode="json")
    data["persona"] = "nobody"
    data["exchanges"][0]["request"]["body"]["tools"][1]["function"]["name"] = "launch"
    (result,) = await replay_fixtures([Fixture.model_validate(data)], settings=Settings.defaults())
    assert not result.ok
    assert "offers launch, which are not example tools" in result.problems[0]


def test_replay_main_prints_a_table_and_returns_1_on_failure(tmp_path: Path) -> None:
    bad = tampered("web_search_hello", name="bad_hello", expected={"content": "nope"})
    (tmp_path / "bad.json").write_text(bad.to_json())
    good = bundled_fixtures_dir() / "web_search_nanaimo.json"
    out = io.StringIO()
    assert replay_main([good, tmp_path], out=out) == 1
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].split() == ["fixture", "rounds", "result", "ms"]
    assert lines[1].split()[:3] == ["web_search_nanaimo", "1", "ok"]
    assert lines[2].split()[:3] == ["bad_hello", "1", "FAIL"]
    assert "  - content: expected 'nope', got 'Hello!" in text
    assert text.rstrip().endswith("1 of 2 fixtures replayed correctly")


def test_replay_main_json(tmp_path: Path) -> None:
    out = io.StringIO()
    assert replay_main([bundled_fixtures_dir() / "plain_answer.json"], as_json=True, out=out) == 0
    payload = json.loads(out.getvalue())
    assert payload["ok"] is True
    assert payload["results"][0]["fixture"] == "plain_answer"
    assert payload["results"][0]["problems"] == []


def test_replay_main_with_nothing_to_replay(tmp_path: Path) -> None:
    out = io.StringIO()
    assert replay_main([tmp_path], out=out) == 1
    assert out.getvalue() == "no fixtures found\n"
    with pytest.raises(FixtureError, match="no fixture file or directory"):
        replay_main([tmp_path / "missing.json"], out=out)


def test_default_paths_include_tests_fixtures_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_replay_paths() == [bundled_fixtures_dir()]
    (tmp_path / "tests" / "fixtures").mkdir(parents=True)
    assert default_replay_paths() == [bundled_fixtures_dir(), Path("tests/fixtures")]


def test_render_table_lists_problems() -> None:
    results = [
        ReplayResult("a", "a.json", True, 1, 12.3, "file"),
        ReplayResult("bb", None, False, 2, 4.0, "fixture", ["content differs"]),
    ]
    assert render_table(results) == (
        "fixture  rounds  result  ms\n"
        "a             1  ok      12\n"
        "bb            2  FAIL     4\n"
        "\nbb (in memory):\n"
        "  - content differs\n"
        "\n1 of 2 fixtures replayed correctly"
    )


@pytest.mark.e2e
def test_the_replay_command_passes_on_the_bundled_fixtures(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "DATA_DIR": str(tmp_path / "data"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "replay", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(done.stdout)
    assert payload["ok"] is True
    assert {
        r["persona"] for r in payload["results"] if r["fixture"].startswith("web_search_n")
    } == {"file"}


async def test_a_conversation_keeps_finding_recorded_answers(tmp_path: Path) -> None:
    """The offline CLI's case: later questions carry earlier turns the fixtures never saw."""
    from generic_framework.core.events import Done, TextDelta
    from generic_framework.mock import MockServer

    async with MockServer() as server:
        config = Settings.defaults(api_key="offline", base_url=server.base_url,
                          personas_dir=REPO / "personas", data_dir=tmp_path)  # fmt: skip
        async with Runtime(config) as runtime:
            scout = runtime.persona("scout")
            first = await scout.respond("// what is 17% of 2,340?", conversation_id="c1")
            texts: list[str] = []
            reply = None
            async for event in scout.stream("// what's the weather in Nanaimo?",
                                            conversation_id="c1"):  # fmt: skip
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                elif isinstance(event, Done):
                    reply = event.reply
        report = server.report()
    assert first.content == "17% of 2,340 is 397.8."
    assert reply is not None and reply.content.startswith("Right now Nanaimo is mild")
    assert len(texts) > 3 and "".join(texts).startswith("Right now Nanaimo")
    assert [c.number for c in reply.citations] == [1, 2, 3]
    assert report["unmatched"] == 0
    served = {f["name"]: f["served"] for f in report["fixtures"]}
    assert served["web_search_nanaimo_stream"] == [1]
    assert served["function_two_rounds"] == [1, 1]


async def test_a_coding_endpoint_fixture_replays_on_the_coding_route() -> None:
    fixture = tampered("function_two_rounds", endpoint="coding")
    # Recorded with the built-in tool: pinned, as WEB_SEARCH_MODE=auto searches through the
    # Web Search MCP server on the coding endpoint.
    settings = Settings.defaults(personas_dir=REPO / "personas", web_search_mode="builtin")
    (result,) = await replay_fixtures([fixture], settings=settings)
    assert result.ok, result.problems


async def test_a_question_with_a_picture_replays_with_it_and_fails_without() -> None:
    with_picture = tampered("picture_described")
    without = tampered("picture_described", pictures=[])
    missing = tampered("picture_described", pictures=["missing.png"])
    results = await replay_fixtures([with_picture, without, missing], settings=Settings.defaults())
    assert [r.ok for r in results] == [True, False, False]
    # Without its picture the question reaches the persona's model undescribed.
    assert results[1].problems[0].startswith("a request had no recorded answer")
    assert results[2].problems[0].startswith("cannot read the picture ")


def test_a_fixture_finds_its_picture_beside_its_file(tmp_path: Path) -> None:
    for name in ("picture_described.json", "sun_over_sea.png"):
        (tmp_path / name).write_bytes((bundled_fixtures_dir() / name).read_bytes())
    out = io.StringIO()
    assert replay_main([tmp_path], out=out) == 0, out.getvalue()
    (tmp_path / "sun_over_sea.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(32))
    out = io.StringIO()
    assert replay_main([tmp_path], out=out) == 1
    assert "no recorded answer" in out.getvalue()
