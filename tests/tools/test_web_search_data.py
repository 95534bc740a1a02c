"""WebSearch is data: settings resolution and the built-in tool's wire form."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from generic_framework.config import Settings
from generic_framework.tools import SEARCH_TOOL_NAME, WebSearch, make_search_tool
from generic_framework.tools.search import compact_results
from generic_framework.wire.messages import WebSearchResult


def test_resolve_fills_from_settings_and_keeps_explicit_values(tmp_path: Path) -> None:
    settings = Settings.defaults(
        web_search_mode="client", web_search_count=7, web_search_recency="oneDay"
    )
    resolved = WebSearch(count=3).resolve(settings)
    assert (resolved.mode, resolved.engine, resolved.count, resolved.recency) == (
        "client", "search_pro_jina", 3, "oneDay",
    )  # fmt: skip


def test_to_wire_always_asks_for_sources() -> None:
    wire = WebSearch(engine="search_std", count=4, domain_filter="a.org").to_wire()
    assert wire == {
        "type": "web_search",
        "web_search": {
            "enable": True,
            "search_engine": "search_std",
            "search_result": True,
            "count": 4,
            "search_domain_filter": "a.org",
        },
    }


def test_invalid_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        WebSearch(mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        WebSearch(count=51)
    with pytest.raises(ValidationError):
        WebSearch(colour="red")  # type: ignore[call-arg]


def test_search_tool_schema() -> None:
    search = make_search_tool(lambda: None, WebSearch())  # type: ignore[arg-type, return-value]
    assert search.name == SEARCH_TOOL_NAME == "search_web"
    props = search.parameters["properties"]
    assert search.parameters["required"] == ["query"]
    assert set(props) == {"query", "recency"}
    assert "oneWeek" in str(props["recency"])


def test_compact_results_trim_and_skip_empty_fields() -> None:
    item = WebSearchResult(title="T", link="https://x", content="y" * 2000, media="", refer="ref_9")
    (entry,) = compact_results([("ref_1", item)])
    assert entry == {"ref": "ref_1", "title": "T", "url": "https://x", "snippet": "y" * 600}
