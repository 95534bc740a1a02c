"""Fixture files: what is written reads back the same, and a bad file gets a clear error."""

from __future__ import annotations

from pathlib import Path

from mock_helpers import chat, completion, exchange, make_fixture, user

from generic_framework.mock import load_fixture


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
