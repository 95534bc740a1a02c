"""The MCP pieces that need no process: specs, ${VAR}, names, results, search parsing, modes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from generic_framework.config import Settings
from generic_framework.core.loader import load_spec
from generic_framework.core.persona import Persona
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.mcp_tools import MCPFailure, MCPServerSpec, offered_name
from generic_framework.mcp_tools.results import MAX_RESULT_CHARS, render_result
from generic_framework.mcp_tools.web_search import (
    find_search_tool,
    parse_results,
    search_arguments,
)
from generic_framework.runtime import Runtime
from generic_framework.tools import WebSearch
from generic_framework.tools.base import NO_OUTPUT

ZAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
EXAMPLES = Path(__file__).resolve().parents[2] / "personas" / "examples"


# ------------------------------------------------------------------------------ specs


def test_a_server_is_stdio_or_http_never_both_or_neither() -> None:
    assert MCPServerSpec(name="a", command="srv").transport == "stdio"
    assert MCPServerSpec(name="a", url="https://x.example/mcp").transport == "http"
    for bad in (
        {"name": "a"},
        {"name": "a", "command": "srv", "url": "https://x.example/mcp"},
        {"name": "a", "url": "https://x.example/mcp", "env": {"A": "1"}},
        {"name": "a", "command": "srv", "headers": {"A": "1"}},
        {"name": "a", "url": "ftp://x.example/mcp"},
        {"name": "a", "command": "srv", "timeout": 0},
        {"name": "a", "command": "srv", "unknown": 1},
    ):
        with pytest.raises(ValueError):
            MCPServerSpec.model_validate(bad)


@pytest.mark.parametrize("name", ["a", "notes", "my_notes", "web-search", "x1" * 16])
def test_server_names_that_are_accepted(name: str) -> None:
    assert MCPServerSpec(name=name, command="srv").name == name


@pytest.mark.parametrize("name", ["", "_a", "a_", "a__b", "a.b", "a b", "x" * 33])
def test_server_names_that_would_make_tool_names_ambiguous_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="invalid"):
        MCPServerSpec(name=name, command="srv")


def test_a_persona_file_with_servers_and_its_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(
        'system_prompt = "x"\n[[mcp_servers]]\nname = "a"\ncommand = "srv"\nargs = ["-v"]\n'
        'tools = ["t"]\ntimeout = 3\n[[mcp_servers]]\nname = "b"\nurl = "https://x.example/mcp"\n'
        'headers = { Authorization = "Bearer ${B_TOKEN}" }\n',
        encoding="utf-8",
    )
    spec = load_spec(good)
    assert [(s.name, s.transport) for s in spec.mcp_servers] == [("a", "stdio"), ("b", "http")]
    assert spec.mcp_servers[0].tools == ("t",) and spec.mcp_servers[0].timeout == 3
    assert spec.mcp_servers[1].headers == {"Authorization": "Bearer ${B_TOKEN}"}  # as written
    twice = tmp_path / "twice.toml"
    twice.write_text(
        'system_prompt = "x"\n[[mcp_servers]]\nname = "a"\ncommand = "s"\n'
        '[[mcp_servers]]\nname = "a"\ncommand = "t"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"twice.toml: mcp_servers: .*two servers are named 'a'"):
        load_spec(twice)
    neither = tmp_path / "neither.toml"
    neither.write_text('system_prompt = "x"\n[[mcp_servers]]\nname = "a"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"neither.toml: mcp_servers.0: .*either command"):
        load_spec(neither)


def test_the_example_persona_is_valid_and_uses_an_allowlist() -> None:
    spec = load_spec(EXAMPLES / "notes.toml")
    (server,) = spec.mcp_servers
    assert server.transport == "stdio" and server.args == ("tests/mcp_servers/notes_server.py",)
    assert server.tools == ("add_note", "list_notes", "search_notes")
    assert server.references() == [("env.NOTES_FILE", "HOME")]


# ------------------------------------------------------------------------------ ${VAR}


def test_variables_are_expanded_from_the_given_environment_only() -> None:
    server = MCPServerSpec(
        name="docs",
        url="https://${HOST}/mcp",
        headers={"Authorization": "Bearer ${TOKEN}", "X-Plain": "plain"},
    )
    assert server.references() == [("headers.Authorization", "TOKEN"), ("url", "HOST")]
    expanded = server.expand({"HOST": "mcp.example.com", "TOKEN": "tok-123"})
    assert expanded.url == "https://mcp.example.com/mcp"
    assert expanded.headers == {"Authorization": "Bearer tok-123", "X-Plain": "plain"}
    assert server.headers["Authorization"] == "Bearer ${TOKEN}"  # the spec is untouched
    with pytest.raises(ConfigError, match=r"headers.Authorization uses \$\{TOKEN\}, which is"):
        server.expand({"HOST": "h"})


def test_a_missing_variable_fails_when_the_persona_is_bound(tmp_path: Path) -> None:
    directory = tmp_path / "personas"
    directory.mkdir()
    (directory / "p.toml").write_text(
        'system_prompt = "x"\n[[mcp_servers]]\nname = "s"\ncommand = "srv"\n'
        'env = { KEY = "${SERVER_KEY}" }\n',
        encoding="utf-8",
    )
    settings = Settings.defaults(personas_dir=directory, data_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"persona 'p': mcp_servers\[0\] \(s\): env.KEY uses"):
        Runtime(settings).persona("p")
    bound = Runtime(settings, environ={"SERVER_KEY": "k"}).persona("p")
    assert bound.spec.mcp_servers[0].env == {"KEY": "${SERVER_KEY}"}
    with pytest.raises(ConfigError, match="SERVER_KEY"):
        Persona("p", "x", mcp_servers=[{"name": "s", "command": "c", "args": ["${SERVER_KEY}"]}])


def test_runtime_from_env_passes_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GF_TEST_TOKEN", "t0k3n-value")
    runtime = Runtime.from_env(data_dir=tmp_path, personas_dir=tmp_path)
    server = MCPServerSpec(name="s", url="https://x.example/mcp",
                           headers={"Authorization": "Bearer ${GF_TEST_TOKEN}"})  # fmt: skip
    assert runtime.mcp.connection(server).server.headers["Authorization"] == "Bearer t0k3n-value"


# ------------------------------------------------------------------------------ names


def test_plain_names_are_server_then_tool() -> None:
    assert offered_name("notes", "add_note", set()) == "notes__add_note"
    assert offered_name("web-2", "search", set()) == "web-2__search"


def test_names_outside_zai_rules_are_cleaned_and_hashed_deterministically() -> None:
    dotted = offered_name("notes", "notes.export", set())
    assert ZAI_NAME.match(dotted) and dotted.startswith("notes__notes_export_")
    assert dotted == offered_name("notes", "notes.export", {"other"})
    spaced = offered_name("s", "résumé tool/v2", set())
    assert ZAI_NAME.match(spaced)
    long = offered_name("a-very-long-server-name-of-32-ch", "t" * 80, set())
    assert ZAI_NAME.match(long) and len(long) == 64
    assert long != offered_name("a-very-long-server-name-of-32-ch", "t" * 81, set())


def test_a_name_already_taken_gets_the_hashed_form() -> None:
    taken = {"notes__add_note"}
    other = offered_name("notes", "add_note", taken)
    assert other != "notes__add_note" and ZAI_NAME.match(other)
    assert other.startswith("notes__add_note_")
    # two tools whose cleaned names meet stay apart
    first = offered_name("s", "a.b", set())
    assert offered_name("s", "a_b", {first}) != first


# ------------------------------------------------------------------------------ results


def text(value: str) -> SimpleNamespace:
    return SimpleNamespace(type="text", text=value)


def test_results_as_tool_message_text() -> None:
    assert render_result([text("one"), text("two")]) == "one\ntwo"
    assert render_result([text('{"a": 1}')], {"a": 1}) == '{"a": 1}'
    assert render_result([text("Saved")], {"result": "Saved"}) == "Saved"
    assert (
        render_result([text("3 notes")], {"count": 3})
        == '3 notes\n\nstructured content: {"count":3}'
    )
    assert render_result([], {"count": 3}) == '{"count":3}'
    assert render_result([]) == NO_OUTPUT
    image = SimpleNamespace(type="image", data="aGVsbG8=", mime_type="image/png")
    assert render_result([image]) == "[image (image/png, about 6 bytes) not shown]"
    resource = SimpleNamespace(type="resource", resource=SimpleNamespace(text="inline", uri="u"))
    link = SimpleNamespace(type="resource_link", name="doc", uri="file:///doc")
    assert render_result([resource, link]) == "inline\n[link: doc file:///doc]"
    huge = render_result([text("x" * (MAX_RESULT_CHARS + 10))])
    assert huge.endswith("[... 10 more characters cut]")


# ------------------------------------------------------------------------------ the search


ITEMS = [
    {"title": "T1", "link": "https://a.example/1", "content": "C1", "media": "A", "refer": "ref_1",
     "publish_date": "2026-01-01"},
    {"title": "T2", "url": "https://b.example/2", "content": "C2", "icon": None, "extra": 5},
]  # fmt: skip


def test_results_are_parsed_up_to_two_json_levels() -> None:
    once = json.dumps(ITEMS)
    twice = json.dumps(once)
    for encoded in (once, twice, json.dumps({"search_result": ITEMS})):
        results, plain = parse_results(encoded)
        assert plain is None
        assert [(r.title, r.link, r.media) for r in results] == [
            ("T1", "https://a.example/1", "A"),
            ("T2", "https://b.example/2", ""),
        ]
    assert parse_results('"[]"') == ([], None)
    assert parse_results("[]") == ([], None)


def test_a_result_that_holds_no_list_is_plain_text() -> None:
    assert parse_results("No results found for that query.") == (
        [],
        "No results found for that query.",
    )
    assert parse_results(json.dumps("Search quota used up")) == ([], "Search quota used up")
    assert parse_results("  ") == ([], None)
    assert parse_results(json.dumps(json.dumps({"status": "ok"}))) == ([], '{"status": "ok"}')


def tool(name: str, schema: dict[str, Any] | None = None) -> SimpleNamespace:
    return SimpleNamespace(name=name, input_schema=schema or {"type": "object"})


def test_the_search_tool_is_found_by_either_name() -> None:
    for name in ("webSearchPrime", "web_search_prime"):
        assert find_search_tool((tool("webReader"), tool(name))).name == name
    assert find_search_tool((tool("anything"),)).name == "anything"
    with pytest.raises(MCPFailure, match=r"no search tool \(it lists: a, b\)"):
        find_search_tool((tool("a"), tool("b")))


def test_search_arguments_follow_the_tool_schema() -> None:
    zai = {"properties": {k: {} for k in ("search_query", "count", "content_size",
                                           "search_recency_filter", "location")}}  # fmt: skip
    assert search_arguments(zai, "q", count=5, search_recency_filter="oneWeek",
                            content_size=None, search_domain_filter="x.org") == {
        "search_query": "q", "count": 5, "search_recency_filter": "oneWeek"}  # fmt: skip
    assert search_arguments({"properties": {"query": {}}}, "q", count=5) == {"query": "q"}
    assert search_arguments({}, "q", count=5, content_size="high") == {
        "search_query": "q",
        "count": 5,
        "content_size": "high",
    }


# ------------------------------------------------------------------------------ modes


@pytest.mark.parametrize(
    ("base_url", "mode"),
    [
        ("https://api.z.ai/api/paas/v4", "builtin"),
        ("https://open.bigmodel.cn/api/paas/v4", "builtin"),
        ("http://127.0.0.1:8090/api/paas/v4", "builtin"),
        ("https://gateway.example.com/v1", "builtin"),
        ("https://gateway.example.com/coding/v1", "builtin"),
        ("https://api.z.ai/api/coding/paas/v4", "mcp"),
        ("https://open.bigmodel.cn/api/coding/paas/v4", "mcp"),
        ("http://127.0.0.1:8090/api/coding/paas/v4", "mcp"),
    ],
)
def test_auto_is_mcp_on_a_coding_endpoint_and_builtin_elsewhere(base_url: str, mode: str) -> None:
    settings = Settings.defaults(base_url=base_url)
    assert settings.web_search_mode == "auto"
    assert settings.search_mode == mode
    assert WebSearch().resolve(settings).mode == mode
    assert WebSearch(mode="auto").resolve(settings).mode == mode
    assert PersonaSpec.build(name="p", system_prompt="x").resolve(settings).web_search.mode == mode
    assert f"auto -> {mode}" in settings.describe_search()


def test_explicit_modes_win_over_auto() -> None:
    coding = Settings.defaults(base_url="https://api.z.ai/api/coding/paas/v4")
    assert WebSearch(mode="builtin").resolve(coding).mode == "builtin"
    general = Settings.defaults(web_search_mode="mcp")
    assert general.search_mode == "mcp"
    assert WebSearch(mode="client").resolve(general).mode == "client"


@pytest.mark.parametrize(
    ("base_url", "explicit", "expected"),
    [
        ("https://api.z.ai/api/coding/paas/v4", None,
         "https://api.z.ai/api/mcp/web_search_prime/mcp"),
        ("https://open.bigmodel.cn/api/paas/v4", None,
         "https://open.bigmodel.cn/api/mcp/web_search_prime/mcp"),
        ("http://127.0.0.1:9/api/coding/paas/v4", None,
         "http://127.0.0.1:9/api/mcp/web_search_prime/mcp"),
        ("https://gateway.example.com/v1", None, "https://api.z.ai/api/mcp/web_search_prime/mcp"),
        ("https://api.z.ai/api/paas/v4", "https://mcp.example/x", "https://mcp.example/x"),
    ],
)  # fmt: skip
def test_the_search_server_url(base_url: str, explicit: str | None, expected: str) -> None:
    settings = Settings.defaults(base_url=base_url, web_search_mcp_url=explicit)
    assert settings.search_mcp_url == expected


def test_a_bad_search_server_url_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="WEB_SEARCH_MCP_URL must start with http"):
        Settings.defaults(web_search_mcp_url="api.z.ai/mcp")
    assert Settings.defaults(web_search_mcp_url=" ").web_search_mcp_url is None
