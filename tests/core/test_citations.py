"""Citation numbering and [ref_N] rewriting."""

from __future__ import annotations

from generic_framework.core.citations import CitationBook
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
