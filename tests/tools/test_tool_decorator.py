"""@tool: schemas from type hints and docstrings, validation, sync/async, errors as text."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from generic_framework.errors import ConfigError, ToolLoopError
from generic_framework.tools import FunctionTool, tool
from generic_framework.tools.base import NO_OUTPUT, parse_docstring, render_output


class Point(BaseModel):
    x: float
    y: float


@tool
async def convert_currency(amount: float, from_code: str, to_code: str = "EUR") -> dict[str, float]:
    """Convert an amount between currencies.

    Uses a fixed rate table.

    Args:
        amount: how much money.
        from_code (str): ISO code to convert
            from, e.g. USD.
        to_code: ISO code to convert to.

    Returns:
        The converted amount.
    """
    return {"amount": amount * 2}


def test_bare_decorator_builds_the_schema_once() -> None:
    assert isinstance(convert_currency, FunctionTool)
    assert convert_currency.to_wire() == {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount between currencies.\n\nUses a fixed rate table.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "description": "how much money."},
                    "from_code": {
                        "type": "string",
                        "description": "ISO code to convert from, e.g. USD.",
                    },
                    "to_code": {
                        "type": "string",
                        "description": "ISO code to convert to.",
                        "default": "EUR",
                    },
                },
                "required": ["amount", "from_code"],
            },
        },
    }  # fmt: skip
    assert convert_currency.spec is convert_currency.spec


def test_decorator_with_arguments_and_rich_types() -> None:
    @tool(name="plot-point", description="Plot a point.")
    def plot(
        point: Point,
        color: Literal["red", "blue"] = "red",
        size: Annotated[int, Field(ge=1, le=10, description="marker size")] = 3,
        json: bool = False,  # a name that clashes with BaseModel.json
    ) -> str:
        return f"{point.x},{point.y},{color},{size},{json}"

    assert plot.name == "plot-point" and plot.description == "Plot a point."
    params = plot.parameters
    assert params["properties"]["color"] == {
        "enum": ["red", "blue"],
        "type": "string",
        "default": "red",
    }
    assert params["properties"]["size"]["maximum"] == 10
    assert "json" in params["properties"]
    assert "Point" in json.dumps(params["$defs"])
    assert "title" not in json.dumps(params)
    assert plot(Point(x=1, y=2)) == "1.0,2.0,red,3,False"  # still callable
    outcome = asyncio.run(
        plot.run('{"point": {"x": 1, "y": 2}, "size": 4, "json": true}', time_limit=1)
    )
    assert outcome.ok and outcome.content == "1.0,2.0,red,4,True"


def test_a_property_named_title_survives_title_stripping() -> None:
    @tool
    def note(title: str) -> str:
        """Make a note."""
        return title

    assert note.parameters["properties"] == {"title": {"type": "string"}}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "bad name"}, "invalid"),
        ({"name": "x" * 65}, "invalid"),
        ({"description": ""}, "no description"),
    ],
)
def test_invalid_tools_fail_with_a_clear_message(kwargs: dict[str, str], message: str) -> None:
    def nodoc(a: int) -> int:
        return a

    with pytest.raises(ConfigError, match=message):
        tool(**kwargs)(nodoc)


def test_unsupported_signatures() -> None:
    def star(*args: int) -> None:
        """Star."""

    def private(_hidden: int) -> None:
        """Private."""

    with pytest.raises(ConfigError, match=r"\*args"):
        tool(star)
    with pytest.raises(ConfigError, match="starts with '_'"):
        tool(private)


async def test_run_validates_and_reports_errors_as_text() -> None:
    ok = await convert_currency.run('{"amount": "2.5", "from_code": "USD"}', time_limit=1)
    assert ok.ok and ok.value == {"amount": 5.0} and ok.content == '{"amount":5.0}'
    bad_json = await convert_currency.run("{", time_limit=1)
    assert not bad_json.ok and "not valid JSON" in (bad_json.error or "")
    missing = await convert_currency.run('{"amount": 1}', time_limit=1)
    assert "from_code: Field required" in missing.content
    wrong_type = await convert_currency.run('{"amount": "lots", "from_code": "X"}', time_limit=1)
    assert "amount" in wrong_type.content and not wrong_type.ok
    not_object = await convert_currency.run("[1, 2]", time_limit=1)
    assert not not_object.ok
    extra = await convert_currency.run('{"amount": 1, "from_code": "X", "bogus": 1}', time_limit=1)
    assert extra.ok  # unknown arguments are ignored


async def test_exceptions_and_timeouts_become_text() -> None:
    @tool
    def fails(secret: str) -> None:
        """Fail loudly."""
        raise KeyError(f"Bearer {secret}")

    @tool
    async def slow() -> str:
        """Too slow."""
        await asyncio.sleep(5)
        return "late"

    @tool
    async def times_out_itself() -> str:
        """Raises its own TimeoutError."""
        raise TimeoutError("upstream socket")

    failed = await fails.run('{"secret": "abcdefghijklmnopqrstuvwxyz"}', time_limit=1)
    assert "KeyError" in failed.content and "abcdefghijklmnop" not in failed.content
    late = await slow.run("", time_limit=0.01)
    assert late.content == "Error: tool 'slow' timed out after 0.01 seconds."
    own = await times_out_itself.run("{}", time_limit=1)
    assert "TimeoutError: upstream socket" in own.content


async def test_framework_bugs_propagate() -> None:
    @tool
    async def bug() -> None:
        """Bug."""
        raise ToolLoopError("broken invariant")

    with pytest.raises(ToolLoopError):
        await bug.run("{}", time_limit=1)


async def test_sync_functions_run_off_the_event_loop() -> None:
    loop_thread = asyncio.get_running_loop()

    @tool
    def blocking() -> bool:
        """Block."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return True  # no loop in this thread: a worker thread
        return False

    outcome = await blocking.run("{}", time_limit=1)
    assert loop_thread and outcome.value is True


def test_render_output() -> None:
    assert render_output("") == NO_OUTPUT and render_output(None) == NO_OUTPUT
    assert render_output("text") == "text"
    assert render_output(Point(x=1, y=2)) == '{"x":1.0,"y":2.0}'
    assert render_output({"when": object()}).startswith('{"when":"<object')


def test_parse_docstring() -> None:
    summary, args = parse_docstring(
        """Do a thing.

        Args:
            a: first.
            b (int): second,
                continued.
            *rest: ignored shape.

        Raises:
            ValueError: never.
        """
    )
    assert summary == "Do a thing."
    assert args == {"a": "first.", "b": "second, continued.", "rest": "ignored shape."}
    assert parse_docstring(None) == ("", {})


async def test_inline_sync_tools_run_on_the_event_loop() -> None:
    loop_thread = threading.get_ident()

    @tool(inline=True)
    def quick() -> int:
        """Return the thread."""
        return threading.get_ident()

    @tool(inline=True)
    def broken() -> None:
        """Raise."""
        raise ValueError("bad input")

    assert quick.inline
    outcome = await quick.run("{}", time_limit=1)
    assert outcome.value == loop_thread
    failed = await broken.run("{}", time_limit=1)
    assert not failed.ok and "ValueError: bad input" in failed.content


def test_inline_is_ignored_for_async_functions() -> None:
    @tool(inline=True)
    async def already_async() -> None:
        """Async."""

    assert not already_async.inline and already_async.is_async
