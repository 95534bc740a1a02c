"""Model profiles: requests shaped by what the chosen model takes; impossible choices refused
when the persona is bound, naming the variable; an unknown model passes with one warning."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from zai_script import Script, call, completion, make_settings

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.runtime import Runtime
from generic_framework.tools import calculate
from generic_framework.wire import profiles
from generic_framework.wire.client import GLMClient
from generic_framework.wire.messages import ChatRequest, Thinking, UserMessage
from generic_framework.wire.profiles import (
    PROFILES,
    REASONING_EFFORTS,
    check_choice,
    nearest_effort,
    profile_for,
    shape_request,
)

MakeScript = Callable[..., Script]
MakeClient = Callable[..., GLMClient]
_made: list[Persona] = []


def persona(settings: Settings, client: GLMClient, **kwargs: Any) -> Persona:
    runtime = Runtime(settings, client=client)
    _made.append(Persona("tester", "You test.", (calculate,), runtime=runtime, **kwargs))
    return _made[-1]


@pytest.fixture(autouse=True)
async def _close() -> AsyncIterator[None]:
    yield
    while _made:
        await _made.pop().runtime.aclose()


def test_the_table_covers_the_families_a_user_can_pick() -> None:
    families = {p.family for p in PROFILES.values()}
    assert {"GLM-4.5", "GLM-4.6", "GLM-4.7", "GLM-5", "GLM-5.1", "GLM-5.2", "GLM-5.3"} <= families
    assert any(p.vision for p in PROFILES.values())
    assert not PROFILES["glm-5.3"].thinking_off and PROFILES["glm-5.2"].thinking_off
    assert PROFILES["glm-5.3"].efforts == ("low", "high", "max")
    assert not PROFILES["glm-4.7"].efforts and PROFILES["glm-4.7"].tool_stream
    assert not PROFILES["glm-4.5"].tool_stream
    assert profile_for("GLM-4.7") is PROFILES["glm-4.7"]


@pytest.mark.parametrize(
    ("model", "values", "sent"),
    [
        ("glm-5.3", {}, "high"),
        ("glm-5.2", {}, "high"),
        ("glm-5.3", {"llm_reasoning_effort": "max"}, "max"),
        ("glm-4.7", {}, None),
    ],
)
async def test_a_documented_effort_is_sent_when_nobody_chose_one(
    tmp_path: Path,
    script: MakeScript,
    client_for: MakeClient,
    model: str,
    values: dict[str, Any],
    sent: str | None,
) -> None:
    settings = make_settings(tmp_path, llm_model=model, **values)
    fake = script(completion("hi", model=model))
    await persona(settings, client_for(fake, settings)).respond("hello")
    assert fake.requests[0].get("reasoning_effort") == sent


def test_the_nearest_effort_goes_up_between_two_as_near() -> None:
    takes = PROFILES["glm-5.3"].efforts
    assert [nearest_effort(e, takes) for e in REASONING_EFFORTS] == [
        "max",
        "max",
        "high",
        "high",
        "low",
        "low",
        "low",
    ]


async def test_reasoning_effort_reaches_a_model_that_takes_it(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, llm_model="glm-5.2", llm_reasoning_effort="low")
    fake = script(completion("hi", model="glm-5.2"))
    await persona(settings, client_for(fake, settings)).respond("hello")
    assert fake.requests[0]["reasoning_effort"] == "low"
    assert fake.requests[0]["model"] == "glm-5.2"


async def test_tool_stream_only_on_streamed_calls_offering_functions(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, llm_model="glm-4.7")
    answer = completion("", tool_calls=[call("calculate", {"expression": "6*7"})])
    fake = script(answer, completion("42"), answer, completion("42"), completion("plain"))
    bot = persona(settings, client_for(fake, settings))
    async for _ in bot.stream("// six times seven"):
        pass
    await bot.respond("// six times seven")
    async for _ in bot.stream("no tools here"):
        pass
    streamed, non_streamed, toolless = fake.requests[0], fake.requests[2], fake.requests[4]
    assert streamed["stream"] is True and streamed["tool_stream"] is True
    assert fake.requests[1]["tool_stream"] is True  # every round that offers functions
    assert "tool_stream" not in non_streamed
    assert toolless["stream"] is True and "tool_stream" not in toolless


async def test_no_tool_stream_for_a_model_that_does_not_take_it(
    tmp_path: Path, script: MakeScript, client_for: MakeClient
) -> None:
    settings = make_settings(tmp_path, llm_model="glm-4.5")
    fake = script(completion("42", model="glm-4.5"))
    async for _ in persona(settings, client_for(fake, settings)).stream("// six times seven"):
        pass
    assert "tool_stream" not in fake.requests[0]


@pytest.mark.parametrize(
    ("values", "spec", "named"),
    [
        ({"llm_model": "glm-5.3", "llm_thinking": "disabled"}, {}, "LLM_THINKING=disabled"),
        ({"llm_model": "glm-4.7", "llm_reasoning_effort": "low"}, {}, "LLM_REASONING_EFFORT=low"),
        ({"llm_model": "glm-5.3", "llm_reasoning_effort": "medium"}, {}, "LLM_REASONING_EFFORT"),
        ({}, {"model": "glm-5.3", "thinking": "disabled"}, "persona 'tester': thinking"),
        ({}, {"model": "glm-4.6", "reasoning_effort": "max"}, "persona 'tester': reasoning_eff"),
        ({}, {"model": "glm-4.6", "thinking": {"clear_thinking": False}}, "clear_thinking"),
    ],
)
def test_a_choice_the_model_cannot_take_is_refused_when_bound(
    tmp_path: Path, values: dict[str, Any], spec: dict[str, Any], named: str
) -> None:
    settings = make_settings(tmp_path, **values)
    with pytest.raises(ConfigError, match=named):
        PersonaSpec.build(name="tester", system_prompt="x", **spec).resolve(settings)


def test_glm_5_3_message_says_what_to_do_instead() -> None:
    problem = check_choice(
        "glm-5.3", thinking="disabled", clear_thinking=None, reasoning_effort=None, names={}
    )
    assert problem is not None
    assert "always thinks" in problem and "low, high, max" in problem


def test_the_cli_exits_2_naming_the_variable(tmp_path: Path) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "p.toml").write_text('system_prompt = "x"\n', encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "PERSONAS_DIR": str(personas),
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_MODEL": "glm-5.3",
        "LLM_THINKING": "disabled",
        "ZAI_API_KEY": "",
    }
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "chat", "hello"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert "LLM_THINKING=disabled" in done.stderr and "glm-5.3" in done.stderr


def test_an_unknown_model_passes_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    profiles._warned.discard("glm-9-test")
    settings = make_settings(tmp_path, llm_model="glm-9-test", llm_reasoning_effort="max")
    with caplog.at_level(logging.WARNING, logger="generic_framework.models"):
        for _ in range(3):
            resolved = PersonaSpec.build(name="p", system_prompt="x").resolve(settings)
        request = ChatRequest(
            model="glm-9-test", messages=[UserMessage(content="x")], reasoning_effort="max"
        )
        assert shape_request(request, stream=True) is request
    assert resolved.model == "glm-9-test" and resolved.reasoning_effort == "max"
    warnings = [r for r in caplog.records if "glm-9-test" in r.getMessage()]
    assert len(warnings) == 1


def test_shape_drops_what_a_hand_built_request_carries_wrongly() -> None:
    request = ChatRequest(
        model="glm-4.6",
        messages=[UserMessage(content="x")],
        reasoning_effort="max",
        thinking=Thinking(type="enabled", clear_thinking=False),
        tool_stream=True,
    )
    shaped = shape_request(request, stream=False)
    assert shaped.reasoning_effort is None and shaped.tool_stream is None
    assert shaped.thinking is not None and shaped.thinking.clear_thinking is None
