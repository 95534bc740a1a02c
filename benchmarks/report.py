"""Markdown tables and the target checks of a harness run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from benchmarks.scenarios import Row
from benchmarks.startup import PUBLIC_IMPORT


@dataclass(frozen=True)
class Verdict:
    """One target: what it asks, what was measured, and whether it was met (None: not measured)."""

    target: str
    measured: str
    met: bool | None


def cell(stats: dict[str, float] | None, digits: int = 2) -> str:
    """``median (min-max)``, or a dash."""
    if not stats:
        return "-"
    if "min" not in stats or stats.get("n", 1) <= 1 or stats["min"] == stats["max"]:
        return f"{stats['median']:.{digits}f}"
    return f"{stats['median']:.{digits}f} ({stats['min']:.{digits}f}-{stats['max']:.{digits}f})"


def table(rows: Iterable[Row], columns: list[tuple[str, str, int]]) -> str:
    """A markdown table: one line per row, one column per (metric, heading, digits)."""
    head = "| client | " + " | ".join(h for _, h, _ in columns) + " | note |"
    rule = "|---|" + "---|" * len(columns) + "---|"
    lines = [head, rule]
    for row in rows:
        cells = " | ".join(cell(row.metrics.get(m), d) for m, _, d in columns)
        lines.append(f"| {row.label} | {cells} | {row.note} |")
    return "\n".join(lines)


def _median(rows: list[Row], key: str, metric: str) -> float | None:
    for row in rows:
        if row.key == key and row.metrics.get(metric):
            return row.metrics[metric]["median"]  # type: ignore[index]
    return None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def _both(mine: float, raw: float, typed: float | None) -> str:
    """The ratio to raw httpx, and to the typed floor when it was measured (with its own)."""
    if not typed:
        return _ratio(mine, raw)
    return f"{_ratio(mine, raw)}; {_ratio(mine, typed)} the typed floor ({_ratio(typed, raw)} raw)"


_OWN = frozenset(
    {
        "raw_httpx",
        "typed_httpx",
        "stored_httpx",
        "persona",
        "persona_inline",
        "persona_conversation",
        "persona_conversation_pg",
        "glmclient",
    }
)
_STORES = (
    ("persona_conversation", "SQLite", 1.25, None),
    ("persona_conversation_pg", "PostgreSQL", 1.6, "stored_httpx"),
)
"""Each store's row, its target against raw httpx, and the floor shown beside it (if any)."""


def verdicts(rows: list[Row]) -> list[Verdict]:
    """Check every target of the benchmark plan against this run's medians."""

    def scenario(number: str) -> list[Row]:
        return [r for r in rows if r.scenario == number]

    return [
        *_sequential_verdicts(scenario("1")),
        *_concurrency_verdicts(scenario("2")),
        *_tools_verdicts(rows),
        *_streaming_verdicts(scenario("4")),
        *_startup_verdicts(scenario("5")),
        *_service_verdicts(scenario("8")),
        *_instruction_verdicts(scenario("9")),
    ]


def _sequential_verdicts(seq: list[Row]) -> list[Verdict]:
    """The subject's CPU per conversation against raw httpx, each store, and the best peer."""
    subject = "persona" if _median(seq, "persona", "cpu_ms") is not None else "glmclient"
    floor = _median(seq, "raw_httpx", "cpu_ms")
    mine = _median(seq, subject, "cpu_ms")
    if mine is None or not floor:
        return []
    out = [
        Verdict(
            f"1. {subject} CPU <= 1.15x raw httpx",
            _both(mine, floor, _median(seq, "typed_httpx", "cpu_ms")),
            mine <= 1.15 * floor,
        ),
        *_store_verdicts(seq, floor),
    ]
    peers = [
        (r.label, r.metrics["cpu_ms"]["median"])  # type: ignore[index]
        for r in seq
        if r.key not in _OWN and r.metrics.get("cpu_ms")
    ]
    if peers:
        best = min(peers, key=lambda p: p[1])
        out.append(
            Verdict(
                f"1. {subject} CPU below every peer",
                f"{mine:.2f} ms vs best peer {best[0]} {best[1]:.2f} ms",
                mine < best[1],
            )
        )
    return out


def _tools_verdicts(rows: list[Row]) -> list[Verdict]:
    """A round of four slow tools takes about one tool's time (they run in parallel)."""
    par = _median(rows, "persona", "conversation_ms")
    if par is None:
        return []
    return [
        Verdict(
            "3. round with 4 x 200 ms tools <= 240 ms",
            f"{par:.0f} ms (whole conversation)",
            par <= 240,
        )
    ]


def _streaming_verdicts(stream: list[Row]) -> list[Verdict]:
    """The first text delta of each shipped client, within 5 ms."""
    out = []
    for key in ("glmclient", "persona"):
        first = _median(stream, key, "first_ms")
        if first is not None:
            out.append(
                Verdict(f"4. {key}: first text delta <= 5 ms", f"{first:.2f} ms", first <= 5)
            )
    return out


def _store_verdicts(seq: list[Row], floor: float) -> list[Verdict]:
    """The turn with a conversation_id, per store; a store row not measured says why."""
    out = []
    for key, store, limit, beside in _STORES:
        target = f"1. persona with a conversation_id ({store}) CPU <= {limit}x raw httpx"
        stored = _median(seq, key, "cpu_ms")
        if stored is not None:
            shown = _ratio(stored, floor)
            if beside and (own := _median(seq, beside, "cpu_ms")):
                shown += f"; {_ratio(stored, own)} the stored floor ({_ratio(own, floor)} raw)"
            out.append(Verdict(target, shown, stored <= limit * floor))
            continue
        row = next((r for r in seq if r.key == key), None)
        if row is not None and row.note:
            out.append(Verdict(target, row.note, None))
    return out


def _concurrency_verdicts(conc: list[Row]) -> list[Verdict]:
    """The shipped clients against raw httpx: wall time against raw httpx's best pool, RSS
    against raw httpx with its default pool (the experiments' rows are context only)."""
    out = []
    walls = [w for key in ("raw_httpx", "raw_httpx_1000") if (w := _median(conc, key, "wall_s"))]
    best = min(walls) if walls else None
    ref_rss = _median(conc, "raw_httpx", "rss_mb")
    for key in ("glmclient", "persona"):
        wall = _median(conc, key, "wall_s")
        rss = _median(conc, key, "rss_mb")
        if wall is None or not best or rss is None or not ref_rss:
            continue
        out.append(
            Verdict(
                f"2. {key}: wall <= 0.8x raw httpx's best pool",
                _ratio(wall, best),
                wall <= 0.8 * best,
            )
        )
        out.append(
            Verdict(
                f"2. {key}: peak RSS <= 1.25x raw httpx",
                _both(rss, ref_rss, _median(conc, "typed_httpx", "rss_mb")),
                rss <= 1.25 * ref_rss,
            )
        )
    return out


def _startup_verdicts(start: list[Row]) -> list[Verdict]:
    out = []
    imp = _median(start, "import:generic_framework", "ms")
    if imp is not None:
        out.append(Verdict("5. import generic_framework <= 150 ms", f"{imp:.0f} ms", imp <= 150))
    public = _median(start, f"import:{PUBLIC_IMPORT}", "ms")
    if public is not None:
        out.append(Verdict(f"5. `{PUBLIC_IMPORT}` <= 150 ms", f"{public:.0f} ms", public <= 150))
        zai = _median(start, "import:zai", "ms")
        if zai is not None:
            out.append(
                Verdict(
                    "5. the public API imports faster than zai-sdk",
                    f"{public:.0f} ms vs {zai:.0f} ms",
                    public < zai,
                )
            )
    cli = _median(start, "cli_help", "ms")
    if cli is not None:
        out.append(Verdict("5. generic-framework --help <= 300 ms", f"{cli:.0f} ms", cli <= 300))
    out += _first_answer(start, "ms", "5. {key}: spawn to first answer <= 1.15x the typed floor")
    raw_first = _median(start, "firstconv:raw_httpx", "ms")
    for key in ("glmclient", "persona"):
        first = _median(start, f"firstconv:{key}", "ms")
        if first is not None and raw_first is not None:
            out.append(
                Verdict(
                    f"5. {key}: first conversation <= raw httpx's + 20 ms",
                    f"{first:.0f} ms vs {raw_first:.0f} ms",
                    first <= raw_first + 20,
                )
            )
    return out


def _first_answer(rows: list[Row], metric: str, target: str) -> list[Verdict]:
    """Spawn to first answer of the shipped clients against the typed floor, raw httpx beside."""
    out = []
    raw = _median(rows, "first:raw_httpx", metric)
    typed = _median(rows, "first:typed_httpx", metric)
    for key in ("glmclient", "persona"):
        mine = _median(rows, f"first:{key}", metric)
        if mine is not None and raw and typed:
            measured = (
                f"{_ratio(mine, typed)} ({mine:.0f} vs {typed:.0f}); "
                f"{_ratio(mine, raw)} raw httpx ({raw:.0f})"
            )
            out.append(Verdict(target.format(key=key), measured, mine <= 1.15 * typed))
    return out


def _service_verdicts(rows: list[Row]) -> list[Verdict]:
    out = []
    floors = (("floor", "the floor"), ("floor-sharded", "a floor on the library's sharded pool"))
    for kind in ("json", "stream"):
        mine = _median(rows, f"service_{kind}", "cpu_ms")
        for floor_kind, name in floors:
            floor = _median(rows, f"{floor_kind}_{kind}", "cpu_ms")
            if floor and mine is not None:
                out.append(
                    Verdict(
                        f"8. service ({kind}): CPU per request <= 1.5x {name}",
                        _ratio(mine, floor),
                        mine <= 1.5 * floor,
                    )
                )
    return out


def _instruction_verdicts(rows: list[Row]) -> list[Verdict]:
    """The rows stated in instructions (callgrind), which the machine's load does not move."""
    out = []
    raw = _median(rows, "chat:raw_httpx", "minstr")
    typed = _median(rows, "chat:typed_httpx", "minstr")
    for key, what, limit in (
        ("persona", "persona", 1.15),
        ("persona_conversation", "persona with a conversation_id (SQLite)", 1.25),
    ):
        mine = _median(rows, f"chat:{key}", "minstr")
        if mine is not None and raw:
            out.append(
                Verdict(
                    f"9. {what}: instructions per chat <= {limit}x raw httpx",
                    _both(mine, raw, typed),
                    mine <= limit * raw,
                )
            )
    target = "9. {key}: instructions to the first answer <= 1.15x the typed floor"
    out += _first_answer(rows, "minstr", target)
    return out


def verdict_table(items: list[Verdict]) -> str:
    """The targets as a markdown table."""
    lines = ["| target | measured | met |", "|---|---|---|"]
    for v in items:
        met = "n/a" if v.met is None else ("met" if v.met else "**not met**")
        lines.append(f"| {v.target} | {v.measured} | {met} |")
    return "\n".join(lines)


SECTIONS: dict[str, tuple[str, list[tuple[str, str, int]]]] = {
    "1": (
        "1. Client CPU per two-round conversation (sequential, zero latency)",
        [("cpu_ms", "CPU ms/conv", 3), ("wall_ms", "wall ms/conv", 3)],
    ),
    "2": (
        "2. Concurrent conversations (server latency per answer)",
        [("wall_s", "wall s", 2), ("cpu_s", "client CPU s", 2), ("rss_mb", "peak RSS MB", 1)],
    ),
    "3": (
        "3. Parallel tools (4 calls, 200 ms each, one round)",
        [("conversation_ms", "conversation ms", 1), ("round_ms", "round ms", 1)],
    ),
    "4": (
        "4. Streaming",
        [
            ("first_ms", "first delta ms", 3),
            ("chunk_us", "CPU us/extra chunk", 1),
            ("cpu_ms", "CPU ms/conv (1 chunk)", 3),
        ],
    ),
    "5": ("5. Start-up", [("ms", "ms", 1)]),
    "6": (
        "6. The mock (requests per second, one core)",
        [("rps", "requests/s", 0), ("client_cpu_pct", "load generator CPU %", 0)],
    ),
    "7": ("7. Profile of scenario 1", [("profiled_ms", "ms/conv under cProfile", 2)]),
    "8": (
        "8. The bot service: /v1/chat/completions under load (clients and latency above)",
        [
            ("cpu_ms", "server CPU ms/request", 3),
            ("rps", "requests/s", 0),
            ("p50_ms", "p50 ms", 1),
            ("p99_ms", "p99 ms", 1),
            ("added_p99_ms", "p99 over the floor ms", 1),
            ("rss_mb", "peak RSS MB", 1),
        ],
    ),
    "9": (
        "9. Instructions (callgrind; per chat, and spawn to first answer)",
        [("minstr", "million instructions", 2)],
    ),
}


def render(rows: list[Row], header: str, profile_text: str) -> str:
    """The whole run as markdown."""
    parts = [header, "## Targets\n", verdict_table(verdicts(rows)), ""]
    for scenario, (title, columns) in SECTIONS.items():
        mine = [r for r in rows if r.scenario == scenario]
        if mine:
            parts += [f"## {title}\n", table(mine, columns), ""]
    if profile_text:
        parts += ["## Where the time goes (importtime, cProfile: own time)\n", profile_text]
    return "\n".join(parts) + "\n"
