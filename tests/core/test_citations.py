"""Citation numbering and [ref_N] rewriting."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from generic_framework.core.citations import (
    CitationBook,
    CitationStream,
    Resolver,
    rewrite_markers,
)
from generic_framework.wire.messages import WebSearchResult


def item(n: int, link: str | None = None, refer: str | None = None) -> WebSearchResult:
    return WebSearchResult(
        title=f"T{n}",
        link=f"https://s/{n}" if link is None else link,
        content=f"c{n}",
        media=f"m{n}",
        refer=f"ref_{n}" if refer is None else refer,
        publish_date="",
    )


def test_server_results_and_marker_styles() -> None:
    book = CitationBook()
    book.add_server_results([item(1), item(2), item(3)])
    text = "A [ref_1], B [Source: ref_2], C 【ref_3】, D [ref_1, ref_3], E [ref_9], F ref_1."
    assert book.rewrite(text) == "A [1], B [2], C [3], D [1][3], E [ref_9], F ref_1."
    first = book.citations[0]
    assert (first.number, first.ref, first.url, first.site, first.snippet) == (
        1, "ref_1", "https://s/1", "m1", "c1",
    )  # fmt: skip


def test_duplicates_keep_their_number_and_later_labels_win() -> None:
    book = CitationBook()
    book.add_server_results([item(1), item(2)])
    book.add_server_results([item(2, refer="ref_1"), item(5, refer="ref_2")])
    assert len(book) == 3
    assert book.rewrite("[ref_1] [ref_2]") == "[2] [3]"


def test_missing_refer_and_missing_link() -> None:
    book = CitationBook()
    book.add_server_results([item(1, refer=""), item(2, link=""), item(2, link="")])
    assert len(book) == 2
    assert book.rewrite("[ref_1][ref_2]") == "[1][2]"


def test_client_results_continue_the_numbering() -> None:
    book = CitationBook()
    first = book.add_client_results([item(1), item(2)])
    second = book.add_client_results([item(2), item(3)])
    assert [label for label, _ in first] == ["ref_1", "ref_2"]
    assert [label for label, _ in second] == ["ref_2", "ref_3"]
    assert book.rewrite("[ref_3]") == "[3]"


def test_text_without_sources_is_untouched() -> None:
    book = CitationBook()
    assert book.rewrite("see [ref_1]") == "see [ref_1]"


# ------------------------------------------------------------------ rewriting while streaming

KNOWN = {"ref_1": 1, "ref_2": 2, "ref_3": 7}
PIECES = [
    "[ref_1]",
    "[ref_2]",
    "[Source: ref_3]",
    "[ref_1, ref_2]",
    "\u3010ref_2\u3011",
    "[ref_9]",
    "[ref_1, ref_9]",
    "[SOURCES\uff1a ref_2]",
    "[",
    "]",
    "\u3010",
    "\u3011",
    "ref_",
    "ref_1",
    "[re",
    "f_1]",
    "[ sour",
    "ce: ",
    " ",
    ", ",
    "abc",
    "7",
    "\n",
    "[link](x)",
    "[1]",
    "_",
]


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(max(c, 0), len(text)) for c in cuts})
    edges = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def streamed(pieces: list[str], resolve: Resolver = KNOWN.get) -> str:
    stream = CitationStream(resolve)
    return "".join(stream.feed(piece) for piece in pieces) + stream.flush()


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=30),
    st.lists(st.integers(min_value=0, max_value=400), max_size=40),
)
def test_any_split_gives_the_whole_text_rewritten(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    assert streamed(chunked(text, cuts)) == rewrite_markers(text, KNOWN.get)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=20))
def test_one_character_at_a_time_matches_the_book(parts: list[str]) -> None:
    book = CitationBook()
    book.add_server_results([item(1), item(2)])
    text = "".join(parts)
    stream = book.stream()
    out = "".join(stream.feed(char) for char in text) + stream.flush()
    assert out == book.rewrite(text)


def test_a_split_marker_is_held_until_it_completes() -> None:
    stream = CitationStream(KNOWN.get)
    assert stream.feed("Rain today [re") == "Rain today "
    assert stream.held == "[re"
    assert stream.feed("f_1") == ""
    assert stream.feed("] and wind") == "[1] and wind"
    assert stream.held == ""


def test_text_that_proves_not_to_be_a_marker_is_released() -> None:
    stream = CitationStream(KNOWN.get)
    assert stream.feed("see [re") == "see "
    assert stream.feed("ad this]") == "[read this]"
    assert stream.feed("a [link") == "a [link"
    assert stream.feed("[x") == "[x"
    assert stream.feed(" [ref_1 x") == " [ref_1 x"
    assert stream.feed("[ref_9]") == "[ref_9]"  # unknown: left as written


def test_an_unfinished_marker_is_flushed_as_written() -> None:
    stream = CitationStream(KNOWN.get)
    assert stream.feed("the end [ref_2") == "the end "
    assert stream.flush() == "[ref_2"
    assert stream.flush() == ""


def test_provisional_numbers_follow_the_sources_numbered_before_the_call() -> None:
    book = CitationBook()
    book.add_server_results([item(1), item(2)])
    stream = book.stream(provisional=True)
    # The call's own ref_1 and ref_2, not the earlier call's: numbered after them.
    assert stream.feed("[ref_2] then [ref_1], [ref_1, ref_4] [ref_3") == "[4] then [3], [3][6] "
    book.add_server_results([item(9, refer="ref_1"), item(1, refer="ref_3")])
    # Once the call's sources are in, the book decides (a repeated source keeps its number).
    assert stream.flush() == "[ref_3"
    assert stream.feed("[ref_3] [ref_1] [ref_2]") == "[1] [3] [2]"
    assert book.stream().feed("[ref_7]") == "[ref_7]"


def test_labels_are_looked_up_when_the_marker_completes() -> None:
    book = CitationBook()
    stream = book.stream()
    assert stream.feed("Sunny [ref_") == "Sunny "
    book.add_server_results([item(1)])
    assert stream.feed("1].") == "[1]."
