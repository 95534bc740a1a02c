"""Numbering a turn's sources and rewriting GLM's ``[ref_N]`` markers to ``[n]``.

Server-side search returns ``web_search[]`` items labelled ``refer: "ref_N"``, and the model
cites them as ``[ref_N]`` (sometimes ``[Source: ref_N]`` or ``[ref_1, ref_2]``;
docs/protocol.md §3).
Client-side results get their labels here, continuing the turn's numbering, so both modes end in
the same :class:`~generic_framework.core.reply.Citation` list and the same ``[n]`` markers.

A source seen twice in one turn (same URL, or same title when the URL is empty) keeps its first
number. When two completions use the same label, the later one wins: the answer cites the
sources of the call that wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from generic_framework.core.reply import Citation
from generic_framework.wire.messages import WebSearchResult

__all__ = ["CitationBook"]

# ASCII or CJK brackets, an optional "Source:" and one or more comma-separated labels.
_MARKER = re.compile(
    r"[\[\u3010]\s*(?:sources?\s*[:\uff1a]\s*)?"
    r"(ref_\d+(?:\s*[,\uff0c\u3001]\s*ref_\d+)*)\s*[\]\u3011]",
    re.IGNORECASE,
)
_LABEL = re.compile(r"ref_\d+", re.IGNORECASE)


class CitationBook:
    """The sources collected during one turn, numbered from 1 in the order first seen."""

    __slots__ = ("_by_key", "_by_ref", "citations")

    def __init__(self) -> None:
        self.citations: list[Citation] = []
        self._by_key: dict[str, int] = {}
        self._by_ref: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.citations)

    def add_server_results(self, results: Iterable[WebSearchResult]) -> None:
        """Add a completion's ``web_search[]``; each item's ``refer`` maps to its number."""
        for position, item in enumerate(results, start=1):
            number = self._add(item, item.refer or f"ref_{position}")
            self._by_ref[(item.refer or f"ref_{position}").lower()] = number

    def add_client_results(
        self, results: Iterable[WebSearchResult]
    ) -> list[tuple[str, WebSearchResult]]:
        """Number client-side search results; return ``(label, item)`` pairs for the model."""
        labelled: list[tuple[str, WebSearchResult]] = []
        for item in results:
            number = self._add(item, "")
            label = f"ref_{number}"
            self._by_ref[label] = number
            labelled.append((label, item))
        return labelled

    def rewrite(self, text: str) -> str:
        """Replace known ``[ref_N]`` markers by ``[n]``; unknown labels are left untouched."""
        if not self._by_ref or "ref_" not in text.lower():
            return text
        return _MARKER.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        numbers = [self._by_ref.get(label.lower()) for label in _LABEL.findall(match.group(1))]
        if any(number is None for number in numbers):
            return match.group(0)
        return "".join(f"[{number}]" for number in numbers)

    def _add(self, item: WebSearchResult, ref: str) -> int:
        key = item.link or f"title:{item.title}|{item.content[:80]}"
        number = self._by_key.get(key)
        if number is not None:
            return number
        number = len(self.citations) + 1
        self._by_key[key] = number
        self.citations.append(
            Citation(
                number=number,
                title=item.title,
                url=item.link,
                site=item.media,
                snippet=item.content,
                published=item.publish_date,
                ref=ref or f"ref_{number}",
            )
        )
        return number
