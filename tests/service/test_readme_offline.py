"""The README's client examples against ``generic-framework serve --mock`` with no key.

The openai-agents snippet is read from the README and run as its own program: it reaches a
final answer only through the bundled fixture's second exchange, which answers a request that
carries the result of the snippet's own ``get_weather``. LangChain's ``bind_tools`` gets the
model's call; a ``json_schema`` answer validates; the page's question lists hold questions a
person can ask, never the failure demonstrations nor a client's tool turn.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import jsonschema
import openai
import pytest
from service_processes import PERSONAS, REPO, Process, base_env

from generic_framework.mock.fixture import load_fixtures

pytestmark = pytest.mark.e2e

langchain_openai = pytest.importorskip("langchain_openai")
pytest.importorskip("agents")

# The schema the bundled json_schema fixture was recorded with (a client's response_format).
(JSON_FIXTURE,) = [f for f in load_fixtures() if f.name == "json_schema_weather"]
assert JSON_FIXTURE.client is not None and JSON_FIXTURE.client.response_format is not None
WEATHER_FORMAT = JSON_FIXTURE.client.response_format


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("readme")
    env = {**base_env(tmp), "PERSONAS_DIR": str(PERSONAS), "DATA_DIR": str(tmp / "data")}
    command = ["serve", "--host", "127.0.0.1", "--port", "0", "--mock"]
    with Process(command, tmp / "bot.log", env, tmp) as process:
        yield process


def _python_block(text: str, needle: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    found = [block for block in blocks if needle in block]
    assert len(found) == 1, f"one python block with {needle!r} expected, found {len(found)}"
    return found[0]


def test_the_readme_openai_agents_snippet_uses_its_tool_offline(bot: Process) -> None:
    snippet = _python_block((REPO / "README.md").read_text(encoding="utf-8"), "Runner.run")
    assert "http://127.0.0.1:8080/v1" in snippet
    body = snippet.replace("http://127.0.0.1:8080/v1", f"{bot.url}/v1")
    program = (
        "import asyncio\n\nasync def main():\n"
        + "".join(f"    {line}\n" for line in body.splitlines())
        + "\nasyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=base_env(bot.cwd),
        cwd=bot.cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Only the fixture's second exchange says this, and it answers only a request holding the
    # snippet's tool result ("Light rain, 9 C") after the model's call of get_weather.
    assert done.stdout.strip() == "It is raining lightly in Nanaimo right now, at about 9 °C."


def test_langchain_bind_tools_gets_tool_calls_offline(bot: Process) -> None:
    from langchain_core.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "Light rain, 9 C"

    chat = langchain_openai.ChatOpenAI(
        model="scout", base_url=f"{bot.url}/v1", api_key="unused", max_retries=0
    ).bind_tools([get_weather])
    message = chat.invoke("What is the weather in Nanaimo?")
    assert [(call["name"], call["args"]) for call in message.tool_calls] == [
        ("get_weather", {"city": "Nanaimo"})
    ]


def test_json_schema_returns_valid_json_offline(bot: Process) -> None:
    client = openai.OpenAI(api_key="unused", base_url=f"{bot.url}/v1", max_retries=0)
    answer = client.chat.completions.create(
        model="scout",
        messages=[{"role": "user", "content": "Describe the weather in Nanaimo."}],
        response_format=WEATHER_FORMAT,
    )
    value = json.loads(answer.choices[0].message.content or "")
    jsonschema.validate(value, WEATHER_FORMAT["json_schema"]["schema"])
    assert value["city"] == "Nanaimo"


def test_the_suggested_question_is_answered_and_the_lists_hold_only_askable_ones(
    bot: Process,
) -> None:
    info = httpx.get(f"{bot.url}/v1/bot", timeout=30).json()
    client = openai.OpenAI(api_key="unused", base_url=f"{bot.url}/v1", max_retries=0)
    answer = client.chat.completions.create(
        model="scout", messages=[{"role": "user", "content": "// weather in Nanaimo today"}]
    )
    assert "9 °C" in (answer.choices[0].message.content or "")
    scout = info["persona_examples"]["scout"]
    assert "// weather in Nanaimo today" in scout
    # Failure demonstrations and a client's own tool turn are not offered to people.
    for hidden in (
        "Write a haiku about the sea.",
        "What is the weather in Nanaimo?",
        "Describe the weather in Nanaimo.",
    ):
        assert hidden not in scout
    assert "What is 15% of 80?" in info["persona_examples"]["helper"]
    assert not set(info["persona_examples"]["helper"]) & set(scout)
