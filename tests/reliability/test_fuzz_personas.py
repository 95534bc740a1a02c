"""Property: any persona file loads as a persona or fails with a ConfigError naming the file.

Hypothesis writes persona files: documents with the known keys (and unknown ones) holding any
TOML value (strings with escapes, huge integers, ``nan`` and ``inf``, dates, arrays, tables,
nesting), near-TOML text and arbitrary bytes. :func:`load_persona` must return a persona or
raise :class:`ConfigError` whose message starts with the file's path; any other exception is a
failure, printed with the document that caused it.

``tool_modules`` only ever names modules that cannot run anything on import (or that do not
exist): importing a persona's modules is what a persona file is for, and a fuzzer must not
import ``antigravity``.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from generic_framework.config import Settings
from generic_framework.core.loader import load_persona
from generic_framework.errors import ConfigError

EXAMPLES = 500
"""About 3 s."""

KEYS = [
    "name",
    "description",
    "system_prompt",
    "model",
    "temperature",
    "thinking",
    "max_tool_rounds",
    "tools",
    "tool_modules",
    "tools_always",
    "final_answer_fallback",
    "web_search",
]
WEB_SEARCH_KEYS = ["mode", "engine", "count", "recency", "domain_filter", "content_size"]
SAFE_MODULES = [
    "generic_framework.tools.examples",
    "json",
    "no_such_module_xyz",
    "",
    "..",
    ".x",
    "a..b",
    "generic_framework.tools.examples.calculate",
    "zz_fuzz_\x00",
]


# ------------------------------------------------------------------------------ TOML writing


def toml_key(key: str) -> str:
    return key if key and all(c.isalnum() or c in "_-" for c in key) else toml_string(key)


def toml_string(text: str) -> str:
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, datetime.date | datetime.datetime | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    assert isinstance(value, dict)
    pairs = (f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
    return "{" + ", ".join(pairs) + "}"


def toml_document(data: dict[str, Any]) -> str:
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items() if k != "web_search"]
    web = data.get("web_search")
    if isinstance(web, dict):
        lines.append("[web_search]")
        lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in web.items()]
    elif web is not None:
        lines.insert(0, f"web_search = {toml_value(web)}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ strategies

SCALARS = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["scout", "glm-4.7", "glm 4", "enabled", "builtin", "oneWeek", "", "../x"]),
    st.integers(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.sampled_from([0.0, 0.5, 1.0, 1.5, -0.0, math.nan, math.inf]),
    st.booleans(),
    st.dates(),
    st.datetimes(),
    st.times(),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
WEB_SEARCH = st.one_of(
    st.dictionaries(st.sampled_from([*WEB_SEARCH_KEYS, "recent"]), VALUES, max_size=4),
    VALUES,
)
TOOL_MODULES = st.one_of(st.lists(st.sampled_from(SAFE_MODULES), max_size=3), SCALARS)


@st.composite
def documents(draw: st.DrawFn) -> str:
    data: dict[str, Any] = {}
    if draw(st.booleans()):
        data["system_prompt"] = draw(st.one_of(st.text(max_size=30), SCALARS))
    for key in draw(st.lists(st.sampled_from([*KEYS, "temprature", "x"]), max_size=5)):
        if key == "tool_modules":
            data[key] = draw(TOOL_MODULES)
        elif key == "web_search":
            data[key] = draw(WEB_SEARCH)
        else:
            data[key] = draw(VALUES)
    return toml_document(data)


FILES = st.one_of(
    documents().map(str.encode),
    documents().map(str.encode),
    st.binary(max_size=120),
    st.text(max_size=120).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.integers(1, 3000).map(lambda depth: b"system_prompt = 'x'\nx = " + b"[" * depth),
)


# ------------------------------------------------------------------------------ the property


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(content=FILES, stem=st.sampled_from(["scout", "my persona", "p.1", "-x", "\u00e9"]))
def test_any_persona_file_loads_or_names_the_file(
    tmp_path: Path, content: bytes, stem: str
) -> None:
    note(f"file {stem}.toml: {content!r}")
    path = tmp_path / f"{stem}.toml"
    path.write_bytes(content)
    try:
        persona = load_persona(path, settings=Settings.defaults())
    except ConfigError as exc:
        assert str(exc).startswith(f"{path}: "), str(exc)
        assert "\n" not in str(exc)
    else:
        assert persona.spec.name and persona.spec.system_prompt is not None


def test_the_property_reaches_both_outcomes(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(toml_document({"system_prompt": "Hi", "temperature": 0.5, "tools": []}))
    assert load_persona(good, settings=Settings.defaults()).spec.temperature == 0.5
    bad = tmp_path / "bad.toml"
    bad.write_text(toml_document({"system_prompt": "Hi", "temperature": math.nan}))
    with pytest.raises(ConfigError, match="temperature: must be a finite number"):
        load_persona(bad, settings=Settings.defaults())
