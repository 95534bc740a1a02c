"""The example tools: time in a timezone, the calculator (never eval), unit conversion."""

from __future__ import annotations

import math
from datetime import datetime

import pytest

from generic_framework.tools import EXAMPLE_TOOLS, calculate, convert_units, current_time
from generic_framework.tools.examples import evaluate


def test_registry() -> None:
    assert sorted(EXAMPLE_TOOLS) == ["calculate", "convert_units", "current_time"]


def test_current_time() -> None:
    now = current_time("America/Vancouver")
    parsed = datetime.fromisoformat(now["datetime"])
    assert parsed.utcoffset() is not None
    assert now["timezone"] == "America/Vancouver" and now["utc_offset"] in {"-0700", "-0800"}
    assert current_time()["utc_offset"] == "+0000"
    with pytest.raises(ValueError, match="IANA"):
        current_time("Mars/Olympus")
    with pytest.raises(ValueError, match="IANA"):
        current_time("../../etc/passwd")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("2 ** 10", 1024),
        ("2 ^ 10", 1024),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("-3 + +2", -1),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(pi, 3)", 3.142),
        ("max(1, 5, 3)", 5),
        ("factorial(10)", 3628800),
        ("2 ** -1", 0.5),
    ],
)
def test_calculator(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("__import__('os').system('echo hi')", "unsupported"),
        ("__import__('os')", "unknown function '__import__'"),
        ("open('/etc/passwd')", "unknown function"),
        ("(1).real", "unsupported"),
        ("[1, 2]", "unsupported"),
        ("x + 1", "unknown name"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("lambda: 1", "unsupported"),
        ("1 if 1 else 2", "unsupported"),
        ("1 < 2", "unsupported"),
        ("9 ** 9 ** 9", "exponents are limited"),
        ("10 ** 5000", "too large"),
        ("2 ** 4000 * 2 ** 4000", "too large"),
        ("factorial(100000)", "factorial"),
        ("1 / 0", "division by zero"),
        ("exp(1000)", "too large"),
        ("(-1) ** 0.5", "not a real number"),
        ("1 +", "not a valid expression"),
        ("1" * 400, "limited to"),
        ("+".join(["1"] * 120), "too complex"),
        ("sqrt(x=1)", "unsupported"),
    ],
)
def test_calculator_refuses(expression: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        evaluate(expression)


def test_calculator_never_calls_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def forbidden(*_: object) -> None:
        raise AssertionError("eval/exec must not be used")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    assert calculate("2 * (3 + 4)") == {"expression": "2 * (3 + 4)", "result": 14}


async def test_calculator_errors_reach_the_model_as_text() -> None:
    outcome = await calculate.run('{"expression": "__import__(\\"os\\")"}', time_limit=1)
    assert not outcome.ok and "unknown function '__import__'" in outcome.content


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1, "km", "m", 1000),
        (1, "mile", "km", 1.609344),
        (10, "lbs", "kg", 4.5359237),
        (1, "gallon", "l", 3.785411784),
        (100, "C", "F", 212),
        (32, "fahrenheit", "celsius", 0),
        (0, "K", "C", -273.15),
        (90, "min", "h", 1.5),
        (100, "km/h", "mph", 62.1371192237),
        (1, "GiB", "MB", 1073.741824),
        (3, "Feet", "inches", 36),
    ],
)
def test_convert_units(value: float, source: str, target: str, expected: float) -> None:
    assert convert_units(value, source, target)["result"] == pytest.approx(expected, rel=1e-9)


def test_convert_units_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="unknown unit"):
        convert_units(1, "furlong", "m")
    with pytest.raises(ValueError, match="cannot convert length"):
        convert_units(1, "km", "kg")
    with pytest.raises(ValueError, match="cannot convert"):
        convert_units(1, "C", "m")
    assert math.isfinite(convert_units(1e300, "km", "m")["result"])
