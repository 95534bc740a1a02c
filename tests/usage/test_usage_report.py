"""Usage accounting over rows built here: grouping, the date filter, prices, output."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from generic_framework.config import Settings
from generic_framework.core.reply import Reply
from generic_framework.errors import ConfigError
from generic_framework.mock import create_app as create_mock
from generic_framework.runtime import Runtime
from generic_framework.usage import (
    ModelPrice,
    PriceTable,
    UsageRow,
    load_prices,
    render_json,
    render_table,
    report_data,
    summarize,
)

REPO = Path(__file__).resolve().parents[2]


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


ROWS = [
    UsageRow(at(1), "scout", "glm-4.7", 1000, 200, 400, 50, 1),
    UsageRow(at(1, 23), "helper", "glm-4.7", 500, 100, 0, 0, 0),
    UsageRow(at(2), "scout", "glm-4.5-air", 3000, 300, 1000, 100, 2),
    UsageRow(at(3), "scout", "glm-4.7", 100, 10, 0, 5, 0),
]

PRICES = PriceTable(
    models={
        "glm-4.7": ModelPrice(
            prompt=Decimal("0.6"), completion=Decimal("2.2"), cached=Decimal("0.11")
        ),
        "glm-4.5-air": ModelPrice(prompt=Decimal("0.2"), completion=Decimal("1.1")),
    },
    web_search=Decimal("0.01"),
    currency="USD",
    source="prices.toml",
)


def test_by_persona_sums_every_count() -> None:
    report = summarize(ROWS, by="persona")
    assert [g.key for g in report.groups] == ["helper", "scout"]
    scout = report.groups[1]
    assert (scout.turns, scout.prompt_tokens, scout.completion_tokens) == (3, 4100, 510)
    assert (scout.cached_tokens, scout.reasoning_tokens, scout.web_searches) == (1400, 155, 3)
    total = report.total
    assert total.turns == len(ROWS)
    assert total.prompt_tokens == sum(r.prompt_tokens for r in ROWS)
    assert total.completion_tokens == sum(r.completion_tokens for r in ROWS)
    assert total.web_searches == sum(r.web_searches for r in ROWS)
    assert total.cost is None  # no table, no estimate


def test_by_model_and_by_day() -> None:
    by_model = summarize(ROWS, by="model")
    assert [(g.key, g.turns) for g in by_model.groups] == [("glm-4.5-air", 1), ("glm-4.7", 3)]
    by_day = summarize(ROWS, by="day")
    assert [(g.key, g.turns) for g in by_day.groups] == [
        ("2026-03-01", 2), ("2026-03-02", 1), ("2026-03-03", 1),
    ]  # fmt: skip


def test_days_follow_the_time_zone_and_since_keeps_later_days() -> None:
    vancouver = timezone(timedelta(hours=-8))
    report = summarize(ROWS, by="day", tz=vancouver)
    # 2026-03-01 23:00 UTC is still the afternoon of March 1 in UTC-8; noon UTC too.
    assert [g.key for g in report.groups] == ["2026-03-01", "2026-03-02", "2026-03-03"]
    assert summarize(ROWS, by="day", tz=timezone(timedelta(hours=2))).groups[1].key == "2026-03-02"
    since = summarize(ROWS, since=date(2026, 3, 2))
    assert since.total.turns == 2
    assert summarize(ROWS, since=date(2026, 4, 1)).groups == []
    naive = UsageRow(datetime(2026, 3, 5, 1), "scout", "glm-4.7")  # naive: taken as UTC
    assert summarize([naive], by="day").groups[0].key == "2026-03-05"


def test_costs_use_the_operators_prices() -> None:
    report = summarize(ROWS, by="model", prices=PRICES)
    air, glm = report.groups
    # glm-4.5-air: 2000 uncached + 1000 cached at the prompt price, 300 completion, 2 searches.
    assert air.cost == (
        Decimal(3000) * Decimal("0.2") + Decimal(300) * Decimal("1.1")
    ) / 10**6 + Decimal("0.02")
    expected = (
        (
            Decimal(600) * Decimal("0.6")
            + Decimal(400) * Decimal("0.11")
            + Decimal(200) * Decimal("2.2")
        )
        + (Decimal(500) * Decimal("0.6") + Decimal(100) * Decimal("2.2"))
        + (Decimal(100) * Decimal("0.6") + Decimal(10) * Decimal("2.2"))
    ) / 10**6 + Decimal("0.01")
    assert glm.cost == expected
    assert report.total.cost == air.cost + glm.cost
    assert report.unpriced_models == []


def test_a_model_without_a_price_is_counted_but_not_priced() -> None:
    rows = [*ROWS, UsageRow(at(4), "scout", "glm-5-preview", 10_000, 1000)]
    report = summarize(rows, prices=PRICES)
    assert report.unpriced_models == ["glm-5-preview"]
    assert report.total.unpriced_turns == 1
    assert report.total.prompt_tokens == sum(r.prompt_tokens for r in rows)
    assert report.total.cost == summarize(ROWS, prices=PRICES).total.cost
    table = render_table(report)
    assert "no price for glm-5-preview" in table
    assert table.splitlines()[-2].split()[-1].endswith("+")


def test_model_names_match_without_case() -> None:
    assert PRICES.price("GLM-4.7") is PRICES.models["glm-4.7"]
    assert PRICES.price("glm-9") is None


def test_json_totals_are_the_sums_and_costs_are_exact() -> None:
    data = json.loads(render_json(summarize(ROWS, by="day", prices=PRICES)))
    assert data["by"] == "day" and data["currency"] == "USD" and data["prices"] == "prices.toml"
    for field in ("turns", "prompt_tokens", "completion_tokens", "cached_tokens",
                  "reasoning_tokens", "web_searches"):  # fmt: skip
        assert data["total"][field] == sum(g[field] for g in data["groups"])
    assert Decimal(data["total"]["cost"]) == sum(Decimal(g["cost"]) for g in data["groups"])
    assert data["groups"][0]["day"] == "2026-03-01"


def test_the_table_has_a_line_per_group_and_a_total() -> None:
    lines = render_table(summarize(ROWS)).splitlines()
    assert lines[0].split() == ["persona", "turns", "prompt", "cached", "completion",
                                "reasoning", "searches", "cost"]  # fmt: skip
    assert [line.split()[0] for line in lines[1:3]] == ["helper", "scout"]
    assert lines[4].split()[:3] == ["total", "4", "4,600"]
    assert lines[-1] == "cost: not estimated (no price table given)"


def test_prices_load_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        'currency = "USD"\nweb_search = 0.01\n'
        '[models."glm-4.7"]\nprompt = 0.6\ncached = 0.11\ncompletion = 2.2\n'
        '[models."glm-4.5-air"]\nprompt = "0.2"\ncompletion = 1.1\n',
        encoding="utf-8",
    )
    table = load_prices(path)
    assert table.models["glm-4.7"] == ModelPrice(Decimal("0.6"), Decimal("2.2"), Decimal("0.11"))
    assert table.models["glm-4.5-air"].cached is None
    assert (table.web_search, table.currency, table.source) == (Decimal("0.01"), "USD", str(path))
    assert summarize(ROWS, prices=table).total.cost == summarize(ROWS, prices=PRICES).total.cost


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("currency = ", "is not valid TOML"),
        ('currency = "USD"\n', "has no [models"),
        ('[models."m"]\nprompt = 1\n', "models.m.completion is missing"),
        ('[models."m"]\nprompt = -1\ncompletion = 1\n', "models.m.prompt must be zero or more"),
        ('[models."m"]\nprompt = "cheap"\ncompletion = 1\n', "models.m.prompt must be a number"),
        ('[models."m"]\nprompt = 1\ncompletion = 1\ninput = 2\n', "unknown key models.m.input"),
        ('web_serach = 1\n[models."m"]\nprompt = 1\ncompletion = 1\n', "unknown key web_serach"),
        ('[models."m"]\nprompt = nan\ncompletion = 1\n', "models.m.prompt must be zero or more"),
    ],
)
def test_a_bad_price_table_names_the_file_and_the_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_prices(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


def test_a_missing_price_table_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the price table"):
        load_prices(tmp_path / "nowhere.toml")


@pytest.mark.usefixtures("no_retry_waits")
async def test_totals_equal_the_sum_of_the_replies_usage(tmp_path: Path) -> None:
    """Rows from real replies (a session against the mock) add up to the replies' usage."""
    settings = Settings.defaults(
        api_key="mock-key", base_url="http://mock.test/api/paas/v4",
        personas_dir=REPO / "personas", data_dir=tmp_path,
    )  # fmt: skip
    questions = [
        ("scout", "// what's the weather in Nanaimo?"),
        ("scout", "// what is 17% of 2,340?"),
        ("scout", "Suggest a name for a grey cat."),
        ("scout", "// what's new in Python 3.13?"),
    ]
    replies: list[tuple[str, Reply]] = []
    async with Runtime(settings, transport=httpx.ASGITransport(app=create_mock())) as runtime:
        for persona, text in questions:
            replies.append((persona, await runtime.persona(persona).respond(text)))
    rows = [
        UsageRow(datetime.now(UTC), persona, reply.model, reply.usage.prompt_tokens,
                 reply.usage.completion_tokens, reply.usage.cached_tokens,
                 reply.usage.reasoning_tokens)
        for persona, reply in replies
    ]  # fmt: skip
    total = report_data(summarize(rows, by="model"))["total"]
    assert total["turns"] == len(replies)
    assert total["prompt_tokens"] == sum(r.usage.prompt_tokens for _, r in replies) > 0
    assert total["completion_tokens"] == sum(r.usage.completion_tokens for _, r in replies) > 0
    assert total["reasoning_tokens"] == sum(r.usage.reasoning_tokens for _, r in replies) > 0
    assert total["cached_tokens"] == sum(r.usage.cached_tokens for _, r in replies)


def test_offline_rows_are_left_out_of_every_group_and_counted_apart() -> None:
    demo = [replace(row, offline=True, persona="demo") for row in ROWS]
    report = summarize([*ROWS, *demo, replace(ROWS[0], when=at(1) - timedelta(days=9),
                                              offline=True)],
                       since=date(2026, 3, 1), prices=PRICES)  # fmt: skip
    billed = summarize(ROWS, since=date(2026, 3, 1), prices=PRICES)
    assert report.offline_turns == len(demo)  # the one before --since is not counted at all
    assert report.total == billed.total and report.groups == billed.groups
    assert report_data(report)["offline_turns"] == len(demo)
    assert report_data(billed)["offline_turns"] == 0
    table = render_table(report).splitlines()
    assert table[-1] == "offline demo turns: 4, not billed (answered by the embedded mock; " \
        "not in the totals)"  # fmt: skip
    assert "offline demo" not in render_table(billed)


async def test_turns_of_an_offline_runtime_are_stored_as_offline(tmp_path: Path) -> None:
    """The same mock answers two runtimes on one store: one told it runs on the embedded mock
    of the offline demo, one that takes the mock for its upstream; only the second's turns
    are totalled."""
    from generic_framework.cli.usage import usage_rows
    from generic_framework.store import SQLiteStore

    store = SQLiteStore(tmp_path / "conversations.sqlite3")
    settings = Settings.defaults(
        api_key="mock-key", base_url="http://mock.test/api/paas/v4",
        personas_dir=REPO / "personas", data_dir=tmp_path,
    )  # fmt: skip
    replies: dict[bool, Reply] = {}
    try:
        for offline in (True, False):
            transport = httpx.ASGITransport(app=create_mock())
            runtime = Runtime(settings, transport=transport, store=store, offline=offline)
            async with runtime:
                scout = runtime.persona("scout")
                replies[offline] = await scout.respond(
                    "// what's the weather in Nanaimo?", conversation_id=f"c-{offline}"
                )
        records = {c: (await store.turns(c) or [])[0].record for c in ("c-True", "c-False")}
        assert [r.offline for r in records.values() if r] == [True, False]
        rows = [row async for row in usage_rows(store, [0])]
    finally:
        await store.aclose()
    report = summarize(rows)
    assert report.offline_turns == 1 and report.total.turns == 1
    assert report.total.prompt_tokens == replies[False].usage.prompt_tokens > 0
    assert report.total.web_searches >= 1
