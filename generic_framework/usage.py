"""Usage accounting: tokens, web searches and turns, grouped, with an estimated cost.

A pure function over rows, so any store can feed it: :func:`summarize` takes an iterable of
:class:`UsageRow` (one per turn: when, persona, model, token counts, web searches), keeps those
since a date, groups them by persona, model, day or user, and prices each row with the operator's
:class:`PriceTable` (a TOML file, :func:`load_prices`). :func:`render_table` and
:func:`render_json` print the :class:`UsageReport`.

No prices are built in: Z.AI's prices change and differ by plan, so any number shipped here
would be wrong sooner or later. Without a table the report has tokens and searches, no cost.

How a row is priced (per million tokens, like Z.AI's price list)::

    (prompt - cached) x prompt + cached x cached_price + completion x completion_price
    + web_searches x web_search

Cached tokens are part of the prompt tokens and reasoning tokens part of the completion tokens
(that is how Z.AI reports them), so neither is counted twice; reasoning is shown, not priced
apart. A row whose model has no price is counted, left out of the cost, and named in
:attr:`UsageReport.unpriced_models`.

A turn the embedded mock of the offline demo answered (:attr:`UsageRow.offline`: no API key, or
``--mock``) was never billed: its tokens and searches are the fixtures' numbers. It is left out
of every group and the total and counted on a line of its own
(:attr:`UsageReport.offline_turns`), so the totals match what Z.AI bills (docs/design/0326).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Literal

from generic_framework.errors import ConfigError

__all__ = [
    "GroupBy",
    "ModelPrice",
    "PriceTable",
    "UsageGroup",
    "UsageReport",
    "UsageRow",
    "load_prices",
    "render_json",
    "render_table",
    "report_data",
    "summarize",
]

GroupBy = Literal["persona", "model", "day", "user"]
_MILLION = Decimal(1_000_000)
_MODEL_KEYS = frozenset({"prompt", "cached", "completion"})
_TOP_KEYS = frozenset({"currency", "web_search", "models"})


@dataclass(frozen=True, slots=True)
class UsageRow:
    """What one turn used.

    Attributes:
        when: when the turn ended (timezone-aware; naive values are taken as UTC).
        persona: the persona that answered.
        model: the model that answered.
        prompt_tokens: prompt tokens over the turn's calls, cached ones included.
        completion_tokens: completion tokens over the turn's calls, reasoning included.
        cached_tokens: prompt tokens Z.AI served from its cache.
        reasoning_tokens: completion tokens spent thinking.
        web_searches: web searches the turn made.
        user: who asked (a user name; the conversation's owner for a turn stored before users
            existed).
        offline: the embedded mock of the offline demo answered (not billed, not totalled).
    """

    when: datetime
    persona: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    web_searches: int = 0
    user: str = ""
    offline: bool = False


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """One model's prices per million tokens (``cached`` defaults to ``prompt``)."""

    prompt: Decimal
    completion: Decimal
    cached: Decimal | None = None

    def cost(self, row: UsageRow) -> Decimal:
        """The tokens of ``row`` at these prices (web searches are priced by the table)."""
        cached_price = self.prompt if self.cached is None else self.cached
        uncached = max(row.prompt_tokens - row.cached_tokens, 0)
        return (
            Decimal(uncached) * self.prompt
            + Decimal(row.cached_tokens) * cached_price
            + Decimal(row.completion_tokens) * self.completion
        ) / _MILLION


@dataclass(frozen=True, slots=True)
class PriceTable:
    """The operator's prices.

    Attributes:
        models: model id (matched without regard to case) -> its prices.
        web_search: the price of one web search.
        currency: what the numbers are in (a label only).
        source: where the table was read from, for the report.
    """

    models: Mapping[str, ModelPrice]
    web_search: Decimal = Decimal(0)
    currency: str = ""
    source: str = ""

    def price(self, model: str) -> ModelPrice | None:
        """The prices of ``model``, if the table has them."""
        found = self.models.get(model)
        if found is None:
            found = next((p for m, p in self.models.items() if m.lower() == model.lower()), None)
        return found


@dataclass(slots=True)
class UsageGroup:
    """The totals of one group (or of the whole report)."""

    key: str
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    web_searches: int = 0
    cost: Decimal | None = None
    unpriced_turns: int = 0

    def add(self, row: UsageRow, cost: Decimal | None) -> None:
        """Count ``row`` (``cost`` ``None``: its model has no price)."""
        self.turns += 1
        self.prompt_tokens += row.prompt_tokens
        self.completion_tokens += row.completion_tokens
        self.cached_tokens += row.cached_tokens
        self.reasoning_tokens += row.reasoning_tokens
        self.web_searches += row.web_searches
        if cost is None:
            self.unpriced_turns += 1
        else:
            self.cost = cost if self.cost is None else self.cost + cost


@dataclass(slots=True)
class UsageReport:
    """Groups in key order, their total, how the cost was estimated, and the turns of the
    offline demo left out of both (``offline_turns``)."""

    by: GroupBy
    since: date | None
    groups: list[UsageGroup]
    total: UsageGroup
    prices: PriceTable | None = None
    unpriced_models: list[str] = field(default_factory=list)
    offline_turns: int = 0


def summarize(
    rows: Iterable[UsageRow],
    *,
    by: GroupBy = "persona",
    since: date | None = None,
    prices: PriceTable | None = None,
    tz: tzinfo = UTC,
) -> UsageReport:
    """Group ``rows`` by persona, model, day (in ``tz``) or user, from ``since`` on, and price
    them; rows the embedded mock answered (``offline``) are only counted.

    Args:
        rows: one per turn, in any order.
        by: the grouping.
        since: keep rows whose day (in ``tz``) is this one or later.
        prices: the operator's table; without one no cost is estimated.
        tz: the time zone that decides a row's day.
    """
    groups: dict[str, UsageGroup] = {}
    total = UsageGroup("total")
    unpriced: set[str] = set()
    offline = 0
    for row in rows:
        day = _day(row.when, tz)
        if since is not None and day < since:
            continue
        if row.offline:
            offline += 1
            continue
        key = {
            "persona": row.persona,
            "model": row.model,
            "day": day.isoformat(),
            "user": row.user,
        }[by]
        cost = _cost(row, prices)
        if prices is not None and cost is None:
            unpriced.add(row.model)
        groups.setdefault(key, UsageGroup(key)).add(row, cost)
        total.add(row, cost)
    ordered = [groups[key] for key in sorted(groups)]
    return UsageReport(by, since, ordered, total, prices, sorted(unpriced), offline)


def _day(when: datetime, tz: tzinfo) -> date:
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return aware.astimezone(tz).date()


def _cost(row: UsageRow, prices: PriceTable | None) -> Decimal | None:
    if prices is None:
        return None
    price = prices.price(row.model)
    if price is None:
        return None
    return price.cost(row) + Decimal(row.web_searches) * prices.web_search


# ---------------------------------------------------------------------- the price table


def load_prices(path: str | Path) -> PriceTable:
    """Read a price table from a TOML file::

        currency = "USD"          # a label for the report
        web_search = 0.01         # per search (optional)

        [models."glm-4.7"]        # per million tokens
        prompt = 0.60             # uncached prompt tokens
        cached = 0.11             # cached prompt tokens (optional: the prompt price)
        completion = 2.20         # completion tokens, reasoning included

    Raises:
        ConfigError: the file is missing, not TOML, or a price is missing, negative or not a
            number; the message names the file and the key.
    """
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the price table {where!r} ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the price table {where!r} is not valid TOML ({exc})") from exc
    _only(data, _TOP_KEYS, where, "")
    models = data.get("models", {})
    if not isinstance(models, dict) or not models:
        raise ConfigError(f'the price table {where!r} has no [models."<model id>"] table')
    return PriceTable(
        models={name: _model_price(entry, where, name) for name, entry in models.items()},
        web_search=_price(data.get("web_search", 0), where, "web_search"),
        currency=str(data.get("currency", "")),
        source=where,
    )


def _model_price(entry: Any, where: str, name: str) -> ModelPrice:
    key = f"models.{name}"
    if not isinstance(entry, dict):
        raise ConfigError(f"the price table {where!r}: {key} must be a table")
    _only(entry, _MODEL_KEYS, where, f"{key}.")
    for needed in ("prompt", "completion"):
        if needed not in entry:
            raise ConfigError(f"the price table {where!r}: {key}.{needed} is missing")
    cached = entry.get("cached")
    return ModelPrice(
        prompt=_price(entry["prompt"], where, f"{key}.prompt"),
        completion=_price(entry["completion"], where, f"{key}.completion"),
        cached=None if cached is None else _price(cached, where, f"{key}.cached"),
    )


def _only(table: dict[str, Any], allowed: frozenset[str], where: str, prefix: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"the price table {where!r}: unknown key {prefix}{unknown[0]} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _price(value: Any, where: str, key: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"the price table {where!r}: {key} must be a number")
    try:
        # Through str, so 0.1 stays 0.1 instead of its binary approximation.
        price = Decimal(str(value))
    except InvalidOperation:
        raise ConfigError(f"the price table {where!r}: {key} must be a number") from None
    if not price.is_finite() or price < 0:
        raise ConfigError(f"the price table {where!r}: {key} must be zero or more")
    return price


# ---------------------------------------------------------------------- output


def _group_json(group: UsageGroup) -> dict[str, Any]:
    return {
        "turns": group.turns,
        "prompt_tokens": group.prompt_tokens,
        "completion_tokens": group.completion_tokens,
        "cached_tokens": group.cached_tokens,
        "reasoning_tokens": group.reasoning_tokens,
        "web_searches": group.web_searches,
        "cost": None if group.cost is None else str(group.cost.normalize()),
        "unpriced_turns": group.unpriced_turns,
    }


def report_data(report: UsageReport) -> dict[str, Any]:
    """The report as JSON-ready data (costs as decimal strings, exact)."""
    prices = report.prices
    return {
        "by": report.by,
        "since": report.since.isoformat() if report.since else None,
        "currency": prices.currency if prices else None,
        "prices": prices.source if prices else None,
        "unpriced_models": report.unpriced_models,
        "groups": [{report.by: g.key, **_group_json(g)} for g in report.groups],
        "total": _group_json(report.total),
        "offline_turns": report.offline_turns,
    }


def render_json(report: UsageReport) -> str:
    """The report as indented JSON (see :func:`report_data`)."""
    return json.dumps(report_data(report), indent=2)


_COLUMNS = ("turns", "prompt", "cached", "completion", "reasoning", "searches", "cost")


def _cells(group: UsageGroup) -> list[str]:
    cost = "-" if group.cost is None else f"{group.cost:.4f}"
    if group.cost is not None and group.unpriced_turns:
        cost += "+"
    numbers = (group.turns, group.prompt_tokens, group.cached_tokens, group.completion_tokens,
               group.reasoning_tokens, group.web_searches)  # fmt: skip
    return [group.key, *(f"{n:,}" for n in numbers), cost]


def render_table(report: UsageReport) -> str:
    """The report as a plain-text table with a total line, a note on the cost and, when there
    were any, the offline demo's turns (left out of the table)."""
    rows = [[report.by, *_COLUMNS], *(_cells(g) for g in report.groups), _cells(report.total)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])

    out = [line(rows[0]), *(line(r) for r in rows[1:-1]), "-" * len(line(rows[0])), line(rows[-1])]
    out.append(_cost_note(report))
    if report.offline_turns:
        out.append(
            f"offline demo turns: {report.offline_turns:,}, not billed "
            "(answered by the embedded mock; not in the totals)"
        )
    return "\n".join(out)


def _cost_note(report: UsageReport) -> str:
    prices = report.prices
    if prices is None:
        return "cost: not estimated (no price table given)"
    currency = f" in {prices.currency}" if prices.currency else ""
    note = f"cost: an estimate{currency} from {prices.source}"
    if report.unpriced_models:
        note += f"; no price for {', '.join(report.unpriced_models)} (+: not counted)"
    return note
