"""Example tools that need no network: the time in a timezone, a calculator, unit conversion.

Persona files name them in ``tools = [...]``; :data:`EXAMPLE_TOOLS` maps names to tools.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from generic_framework.tools.base import FunctionTool, tool

__all__ = ["EXAMPLE_TOOLS", "calculate", "convert_units", "current_time", "evaluate"]

MAX_EXPRESSION_CHARS = 300
MAX_INT_BITS = 4096
MAX_EXPONENT = 10_000
MAX_NODES = 200


@tool
def current_time(timezone: str = "UTC") -> dict[str, str]:
    """Get the current date and time in a timezone.

    Args:
        timezone: an IANA timezone name such as Europe/Berlin or America/Vancouver.
    """
    try:
        zone = ZoneInfo(timezone.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {timezone!r}; use an IANA name such as Europe/Berlin"
        ) from None
    now = datetime.now(UTC).astimezone(zone)
    return {
        "timezone": str(zone),
        "datetime": now.isoformat(timespec="seconds"),
        "weekday": now.strftime("%A"),
        "utc_offset": now.strftime("%z"),
    }


# --------------------------------------------------------------------------- calculator

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "hypot": math.hypot,
    "factorial": math.factorial,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError("the result is too large")
    return value


def _power(base: Any, exponent: Any) -> Any:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponents are limited to +/-{MAX_EXPONENT}")
    exact = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if exact and max(base.bit_length(), 1) * exponent > MAX_INT_BITS * 2:
        raise ValueError("the result is too large")
    return base**exponent


def _call(name: str, nodes: list[ast.expr]) -> Any:
    function = _FUNCTIONS.get(name)
    if function is None:
        raise ValueError(f"unknown function {name!r}; allowed: {', '.join(sorted(_FUNCTIONS))}")
    args = [_eval(node) for node in nodes]
    if name == "factorial" and (not args or not isinstance(args[0], int) or args[0] > 500):
        raise ValueError("factorial takes one integer up to 500")
    return function(*args)


def _leaf(node: ast.Constant | ast.Name) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"only numbers are allowed, not {node.value!r}")
        return node.value
    if node.id not in _CONSTANTS:
        raise ValueError(f"unknown name {node.id!r}; constants: {', '.join(_CONSTANTS)}")
    return _CONSTANTS[node.id]


def _binary(node: ast.BinOp) -> Any:
    left, right = _eval(node.left), _eval(node.right)
    if isinstance(node.op, ast.Pow):
        return _check_size(_power(left, right))
    return _check_size(_BINARY[type(node.op)](left, right))


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant | ast.Name):
        return _leaf(node)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _binary(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        return _check_size(_call(node.func.id, node.args))
    raise ValueError(f"unsupported syntax: {type(node).__name__}")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely: an AST walk over a whitelist, never ``eval``.

    Raises:
        ValueError: the expression is too long, uses something outside the whitelist, or its
            result would be too large.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expressions are limited to {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.replace("^", "**").strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a valid expression: {exc.msg}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ValueError("the expression is too complex")
    try:
        result = _eval(tree)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None
    if isinstance(result, complex):
        raise ValueError("the result is not a real number")
    return result  # type: ignore[no-any-return]


@tool(inline=True)  # pure and bounded (length, node and size limits): no thread needed
def calculate(expression: str) -> dict[str, Any]:
    """Evaluate an arithmetic expression, e.g. "2**10 / 3" or "sqrt(2) * pi".

    Args:
        expression: numbers, + - * / // % ** (or ^), parentheses, pi, e, tau and the functions
            abs, round, min, max, sqrt, exp, log, log10, log2, sin, cos, tan, asin, acos, atan,
            floor, ceil, hypot, factorial.
    """
    return {"expression": expression, "result": evaluate(expression)}


# --------------------------------------------------------------------------- units

# Each unit: (dimension, factor to the dimension's base unit). Temperatures are affine and
# handled apart.
_UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "yd": ("length", 0.9144),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "nmi": ("length", 1852.0),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "mg": ("mass", 1e-6),
    "t": ("mass", 1000.0),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "st": ("mass", 6.35029318),
    "l": ("volume", 1.0),
    "ml": ("volume", 0.001),
    "m3": ("volume", 1000.0),
    "gal": ("volume", 3.785411784),
    "qt": ("volume", 0.946352946),
    "pt": ("volume", 0.473176473),
    "cup": ("volume", 0.2365882365),
    "floz": ("volume", 0.0295735295625),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "d": ("time", 86400.0),
    "wk": ("time", 604800.0),
    "m/s": ("speed", 1.0),
    "km/h": ("speed", 1 / 3.6),
    "mph": ("speed", 0.44704),
    "kn": ("speed", 1852.0 / 3600.0),
    "b": ("data", 1.0),
    "kb": ("data", 1e3),
    "mb": ("data", 1e6),
    "gb": ("data", 1e9),
    "tb": ("data", 1e12),
    "kib": ("data", 1024.0),
    "mib": ("data", 1024.0**2),
    "gib": ("data", 1024.0**3),
}
_TEMPERATURES = frozenset({"c", "f", "k"})
_ALIASES: dict[str, str] = {
    "meter": "m", "meters": "m", "metre": "m", "metres": "m",
    "kilometer": "km", "kilometers": "km", "kilometre": "km", "kilometres": "km",
    "centimeter": "cm", "centimeters": "cm", "millimeter": "mm", "millimeters": "mm",
    "mile": "mi", "miles": "mi", "yard": "yd", "yards": "yd", "foot": "ft", "feet": "ft",
    "inch": "in", "inches": "in", "nautical mile": "nmi", "nautical miles": "nmi",
    "kilogram": "kg", "kilograms": "kg", "gram": "g", "grams": "g", "milligram": "mg",
    "tonne": "t", "tonnes": "t", "pound": "lb", "pounds": "lb", "lbs": "lb",
    "ounce": "oz", "ounces": "oz", "stone": "st",
    "liter": "l", "liters": "l", "litre": "l", "litres": "l", "milliliter": "ml",
    "milliliters": "ml", "gallon": "gal", "gallons": "gal", "quart": "qt", "quarts": "qt",
    "pint": "pt", "pints": "pt", "cups": "cup", "fl oz": "floz", "fluid ounce": "floz",
    "fluid ounces": "floz", "sec": "s", "second": "s", "seconds": "s", "minute": "min",
    "minutes": "min", "hour": "h", "hours": "h", "hr": "h", "day": "d", "days": "d",
    "week": "wk", "weeks": "wk", "kph": "km/h", "kmh": "km/h", "knot": "kn", "knots": "kn",
    "byte": "b", "bytes": "b",
    "celsius": "c", "°c": "c", "fahrenheit": "f", "°f": "f", "kelvin": "k",
}  # fmt: skip


def _unit(name: str) -> str:
    key = " ".join(name.strip().lower().split())
    key = _ALIASES.get(key, key)
    if key not in _UNITS and key not in _TEMPERATURES:
        raise ValueError(f"unknown unit {name!r}")
    return key


def _to_kelvin(value: float, unit: str) -> float:
    return {"c": value + 273.15, "f": (value - 32) * 5 / 9 + 273.15, "k": value}[unit]


def _from_kelvin(value: float, unit: str) -> float:
    return {"c": value - 273.15, "f": (value - 273.15) * 9 / 5 + 32, "k": value}[unit]


@tool(inline=True)  # a table lookup and one multiplication
def convert_units(value: float, from_unit: str, to_unit: str) -> dict[str, Any]:
    """Convert a quantity between units of length, mass, volume, time, speed, data or temperature.

    Args:
        value: the quantity to convert.
        from_unit: its unit, e.g. km, mi, lb, kg, l, gal (US), h, mph, MiB, C, F, K.
        to_unit: the unit to convert to (same kind of quantity).
    """
    source, target = _unit(from_unit), _unit(to_unit)
    if source in _TEMPERATURES or target in _TEMPERATURES:
        if not (source in _TEMPERATURES and target in _TEMPERATURES):
            raise ValueError(f"cannot convert {from_unit} to {to_unit}")
        result = _from_kelvin(_to_kelvin(value, source), target)
    else:
        (kind, factor), (target_kind, target_factor) = _UNITS[source], _UNITS[target]
        if kind != target_kind:
            raise ValueError(f"cannot convert {kind} ({from_unit}) to {target_kind} ({to_unit})")
        result = value * factor / target_factor
    return {"value": value, "from": from_unit, "to": to_unit, "result": round(result, 10)}


EXAMPLE_TOOLS: dict[str, FunctionTool] = {
    t.name: t for t in (current_time, calculate, convert_units)
}
"""The example tools by name, as persona files refer to them."""
