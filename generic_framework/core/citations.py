"""Numbering a turn's sources and rewriting GLM's ``[ref_N]`` markers to ``[n]``.

Server-side search returns ``web_search[]`` items labelled ``refer: "ref_N"``, and the model
cites them as ``[ref_N]`` (sometimes ``[Source: ref_N]`` or ``[ref_1, ref_2]``;
docs/protocol.md §3).
Client-side results get their labels here, continuing the turn's numbering, so both modes end in
the same :class:`~generic_framework.core.reply.Citation` list and the same ``[n]`` markers.

:class:`CitationStream` rewrites the same markers in text that arrives in pieces: a piece that
may end inside a marker (``[re`` before ``f_1]``) is held until the marker completes or proves
not to be one, so any split of a text gives the output of :func:`rewrite_markers` on the whole.

A source seen twice in one turn (same URL, or same title when the URL is empty) keeps its first
number. When two completions use the same label, the later one wins: the answer cites the
sources of the call that wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from generic_framework.core.reply import Citation
from generic_framework.wire.messages import WebSearchResult

__all__ = ["CitationBook", "CitationStream", "Resolver", "rewrite_markers"]

# ASCII or CJK brackets, an optional "Source:" and one or more comma-separated labels.
_MARKER = re.compile(
    r"[\[\u3010]\s*(?:sources?\s*[:\uff1a]\s*)?"
    r"(ref_\d+(?:\s*[,\uff0c\u3001]\s*ref_\d+)*)\s*[\]\u3011]",
    re.IGNORECASE,
)
_LABEL = re.compile(r"ref_\d+", re.IGNORECASE)
_OPENERS = "[\u3010"
_CLOSERS = "]\u3011"
# What may follow an opening bracket in text that can still become a marker: the prefixes of
# the body of _MARKER (a marker holds no other bracket, so the text after its opener is whole).
_PARTIAL = re.compile(
    r"\s*(?:"
    r"(?:sources?\s*[:\uff1a]\s*)?"
    r"(?:ref_\d+\s*[,\uff0c\u3001]\s*)*(?:ref_\d+\s*|ref_|ref|re|r)?"
    r"|sources?\s*|sourc|sour|sou|so|s"
    r")",
    re.IGNORECASE,
)

Resolver = Callable[[str], int | None]
"""Gives the number of a label such as ``ref_3`` (lower case), or None when it is unknown."""


def rewrite_markers(text: str, resolve: Resolver) -> str:
    """Replace every marker whose labels all resolve by ``[n]`` markers; leave the rest alone."""
    if "ref_" not in text.lower():
        return text

    def replace(match: re.Match[str]) -> str:
        labels = _LABEL.findall(match.group(1))
        numbers = [resolve(label.lower()) for label in labels]
        if any(number is None for number in numbers):
            return match.group(0)
        return "".join(f"[{number}]" for number in numbers)

    return _MARKER.sub(replace, text)


def _open_marker_at(text: str) -> int:
    """Where a marker that may still complete starts in ``text``; ``len(text)`` if nowhere.

    Only the last opening bracket can start one: an earlier opener is followed by a later one,
    which no marker contains.
    """
    start = max(text.rfind(opener) for opener in _OPENERS)
    if start < 0:
        return len(text)
    body = text[start + 1 :]
    if any(closer in body for closer in _CLOSERS) or not _PARTIAL.fullmatch(body):
        return len(text)
    return start


class CitationStream:
    """Rewrites ``[ref_N]`` markers in text that arrives in pieces (a streamed answer).

    :meth:`feed` returns what can be shown now; :meth:`flush` returns the rest at the end.
    For any split of a text, the concatenated output equals ``rewrite_markers(text, resolve)``
    when ``resolve`` gives the same answers throughout. Only a possible marker is ever held
    back: an opening bracket followed by what a marker's beginning looks like.

    Args:
        resolve: the number of a label, or None to leave its marker as written.
    """

    __slots__ = ("_held", "_resolve")

    def __init__(self, resolve: Resolver) -> None:
        self._resolve = resolve
        self._held = ""

    @property
    def held(self) -> str:
        """Text received but not returned yet (the start of a possible marker)."""
        return self._held

    def feed(self, piece: str) -> str:
        """Take the next piece; return the text that is settled, rewritten."""
        text = self._held + piece
        cut = _open_marker_at(text)
        self._held = text[cut:]
        return rewrite_markers(text[:cut], self._resolve)

    def flush(self) -> str:
        """The text still held, rewritten (the stream ended)."""
        text, self._held = self._held, ""
        return rewrite_markers(text, self._resolve)


class CitationBook:
    """The sources collected during one turn, numbered from 1 in the order first seen."""

    __slots__ = ("_batches", "_by_key", "_by_ref", "citations")

    def __init__(self) -> None:
        self.citations: list[Citation] = []
        self._batches = 0
        self._by_key: dict[str, int] = {}
        self._by_ref: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.citations)

    def add_server_results(self, results: Iterable[WebSearchResult]) -> None:
        """Add a completion's ``web_search[]``; each item's ``refer`` maps to its number."""
        self._batches += 1
        for position, item in enumerate(results, start=1):
            label = item.refer or f"ref_{position}"
            self._by_ref[label.lower()] = self._add(item, label)

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
        if not self._by_ref:
            return text
        return rewrite_markers(text, self._by_ref.get)

    def stream(self, *, provisional: bool = False) -> CitationStream:
        """A :class:`CitationStream` over this book, for the text of one streamed model call.

        A label is looked up when its marker completes, so sources added meanwhile count.
        Server-side search sends its ``web_search[]`` only on a stream's last chunk
        (docs/protocol.md §4), after the text that cites it, and the model cites the results
        of its own call (earlier calls' results are not sent back to it). With
        ``provisional`` (the call offers the built-in search), until the call's sources are
        added ``ref_k`` is shown as the k-th source after those numbered before the call:
        the number it gets unless the call's results repeat a source already numbered. The
        reply's content, rewritten once the sources are known, stays the reference.
        """
        if not provisional:
            return CitationStream(self._by_ref.get)
        base, batches = len(self.citations), self._batches

        def resolve(label: str) -> int | None:
            if self._batches > batches:  # the call's own sources are in: exact numbers
                return self._by_ref.get(label)
            return base + int(label[4:])

        return CitationStream(resolve)

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
