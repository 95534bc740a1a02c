"""Fixture files: what is written reads back the same, and a bad file gets a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mock_helpers import chat, completion, exchange, make_fixture, user

from generic_framework.mock import FixtureError, create_app, load_fixture


def test_a_fault_on_every_attempt_survives_writing(tmp_path: Path) -> None:
    faults = [
        {"kind": "http_error", "status": 500, "code": "500", "times": None},
        {"kind": "delay", "ms": 5},
        {"kind": "drop_connection", "times": 2},
    ]
    written = make_fixture("always", exchange(chat(user("q")), completion("a"), faults=faults))
    path = tmp_path / "always.json"
    path.write_text(written.to_json(), encoding="utf-8")
    read = load_fixture(path)
    assert [getattr(f, "times", "?") for f in read.exchanges[0].faults] == [None, None, 2]
    assert read.model_dump() == written.model_dump()


# ------------------------------------------------------------------------------ fuzzing

VALID = make_fixture(
    "valid",
    exchange(
        chat(user("q"), stream=True),
        events=[
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "a"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            "[DONE]",
        ],
        faults=[{"kind": "stall_stream", "after_events": 1, "seconds": 1}],
    ),
    exchange(chat(user("q2")), completion("b")),
).model_dump(mode="json")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_paths(item, (*prefix, index)))
    return found


def _mutated(data: Any, path: tuple[Any, ...], replacement: Any, delete: bool) -> Any:
    if not path:
        return replacement
    copy = json.loads(json.dumps(data))
    target = copy
    for part in path[:-1]:
        target = target[part]
    if delete and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = replacement
    return copy


def _load_and_serve(path: Path) -> None:
    """What the mock does with a fixture file: load it, then prepare it for serving."""
    try:
        create_app([load_fixture(path)])
    except FixtureError as error:
        assert str(path) in str(error), error
        assert "\n" not in str(error).split(str(path))[0]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), replacement=json_values, delete=st.booleans())
def test_a_damaged_fixture_loads_or_fails_naming_its_file(
    tmp_path: Path, data: st.DataObject, replacement: Any, delete: bool
) -> None:
    path = data.draw(st.sampled_from(_paths(VALID)))
    damaged = _mutated(VALID, path, replacement, delete)
    target = tmp_path / "damaged.json"
    target.write_text(json.dumps(damaged), encoding="utf-8")
    _load_and_serve(target)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_load_or_fail_naming_the_file(tmp_path: Path, raw: bytes) -> None:
    target = tmp_path / "bytes.json"
    target.write_bytes(raw)
    _load_and_serve(target)


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe{}", b"[" * 100_000, b'{"name": "x", "exchanges": ' + b"[" * 50_000],
    ids=["not-utf8", "deep-list", "deep-inside"],
)
def test_hostile_files_fail_naming_the_file(tmp_path: Path, raw: bytes) -> None:
    target = tmp_path / "hostile.json"
    target.write_bytes(raw)
    with pytest.raises(FixtureError, match=r"hostile\.json"):
        load_fixture(target)
