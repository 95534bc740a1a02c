"""The source of the web page's test fixtures: ``python tests/service/page_fixture_factory.py``
rewrites ``tests/service/page_fixtures/``.

Built with the bundled fixtures' building blocks (``tests/mock/fixture_parts.py``), so their
requests are the ones the scout persona sends. Each serves one browser test: a markdown answer,
an answer and sources carrying script and ``javascript:`` links, and a stream that stalls part-way
(for the stop button).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mock"))

from fixture_parts import Conversation, completion, fixture, source

from generic_framework.mock.fixture import Fixture

TARGET = Path(__file__).resolve().parent / "page_fixtures"

MARKDOWN_QUESTION = "Show me some markdown, please."
MARKDOWN_ANSWER = (
    "Here is a **bold claim** and some `inline code`.\n\n"
    "- the first item\n"
    "- the second item\n\n"
    "```\n"
    'print("hello")\n'
    "```\n"
)

HOSTILE_QUESTION = "// hostile sources, please"
HOSTILE_ANSWER = (
    "Careful <script>window.__pwned = 1</script> here [ref_1], a "
    "[tempting link](javascript:window.__pwned=2) and "
    '<img src="x" onerror="window.__pwned=3"> and a safe one [ref_2].'
)
HOSTILE_SOURCES = [
    source(
        1,
        "<script>window.__pwned = 4</script>Evil title",
        "javascript:window.__pwned=5",
        "<b>Evil site</b>",
        "A result whose fields carry markup.",
        "",
    ),
    source(
        2,
        "A fine page",
        "https://fine.example.org/page",
        "Fine Example",
        "An ordinary result.",
        "",
    ),
]

SLOW_QUESTION = "Tell me a long story, slowly."
SLOW_ANSWER = (
    "Once upon a time, a lighthouse keeper counted the waves. Each night she lit the lamp, "
    "and each morning she wrote down what the sea had brought: driftwood, a bottle, a letter "
    "from far away, and once a small boat with nobody in it."
)


def page_markdown() -> Fixture:
    talk = Conversation(MARKDOWN_QUESTION)
    talk.exchange(completion("page-markdown", MARKDOWN_ANSWER, usage=(40, 30, 0)))
    return fixture(
        "page_markdown",
        "A plain question whose answer is markdown: bold, inline code, a list, a code block.",
        MARKDOWN_QUESTION,
        talk,
        content=MARKDOWN_ANSWER,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )


def page_hostile() -> Fixture:
    talk = Conversation(HOSTILE_QUESTION)
    talk.exchange(
        completion("page-hostile", HOSTILE_ANSWER, usage=(900, 60, 0), web_search=HOSTILE_SOURCES)
    )
    return fixture(
        "page_hostile",
        "A web answer and sources carrying <script>, an onerror image and javascript: links: "
        "the page must show them as text and link nothing to javascript:.",
        HOSTILE_QUESTION,
        talk,
        stop_reason="completed",
        rounds=1,
    )


def page_slow() -> Fixture:
    talk = Conversation(SLOW_QUESTION, stream=True)
    talk.exchange(
        completion("page-slow", SLOW_ANSWER, usage=(50, 60, 0)),
        faults=[{"kind": "stall_stream", "after_events": 3, "seconds": 60}],
        note="three chunks, then a minute of silence: long enough to press Stop",
    )
    return fixture(
        "page_slow",
        "A streamed answer that stalls after three chunks (the stop button's test).",
        SLOW_QUESTION,
        talk,
        content=SLOW_ANSWER,
        stop_reason="completed",
        rounds=1,
    )


SCENARIOS = [page_markdown, page_hostile, page_slow]


def main(target: Path = TARGET) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        path = target / f"{scenario.__name__}.json"
        path.write_text(scenario().to_json(), encoding="utf-8")
        print(f"wrote {path.name}")


if __name__ == "__main__":
    main()
