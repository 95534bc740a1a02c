"""Blocks of runs packed into a platform's messages, and emitted in its markup.

Splitting works on the runs of :mod:`generic_framework.chats.markup` (docs/design/0613): blocks
(paragraphs, list items, code blocks, the sources) are packed into messages of at most a limit
of visible text, counted as the platform counts it. A block longer than that alone is cut at
its last line break, else its last space, else anywhere between two code points; each piece's
tags are closed at its end and opened again in the next message (:func:`spans`), so a long code
block continues as a code block. A platform whose limit counts the markup too (Discord) is
served by :func:`render`, which packs again with a smaller budget until every emitted message
fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from generic_framework.chats.markup import (
    Block,
    Emitter,
    Run,
    Tag,
    Tags,
    Units,
    markdown_blocks,
    shared,
    sources,
    utf16_units,
    web_url,
)
from generic_framework.core.reply import Citation

__all__ = ["joined", "links_of", "pack", "render", "spans", "tail"]


def _cut(text: str, limit: int, units: Units) -> tuple[int, int]:
    """Where to cut ``text`` to keep at most ``limit`` units: (end of head, start of tail)."""
    used = 0
    fits = 0
    for i, char in enumerate(text):
        used += units(char)
        if used > limit:
            break
        fits = i + 1
    for sep in ("\n", " "):
        at = text.rfind(sep, 0, fits + 1)
        if at > 0:
            return at, at + 1
    return max(fits, 1), max(fits, 1)


def _slice(runs: Sequence[Run], start: int, end: int) -> list[Run]:
    """The runs covering code points ``start:end`` of their joined text."""
    out: list[Run] = []
    pos = 0
    for run in runs:
        lo, hi = max(start - pos, 0), min(end - pos, len(run.text))
        if lo < hi:
            out.append(Run(run.text[lo:hi], run.tags))
        pos += len(run.text)
    return out


def _split(runs: list[Run], limit: int, units: Units) -> list[list[Run]]:
    """One over-long block as pieces of at most ``limit`` units each."""
    pieces: list[list[Run]] = []
    text = "".join(run.text for run in runs)
    while units(text) > limit:
        head, rest = _cut(text, limit, units)
        pieces.append(_slice(runs, 0, head))
        runs = _slice(runs, rest, len(text))
        text = text[rest:]
    pieces.append(runs)
    return pieces


def pack(blocks: Sequence[Block], limit: int, units: Units = utf16_units) -> list[list[Run]]:
    """Blocks packed into messages of at most ``limit`` units, split only when one is too long."""
    messages: list[list[Run]] = []
    current: list[Run] = []
    size = 0
    outer: Tags = ()
    for block in blocks:
        length = units("".join(run.text for run in block.runs))
        if current:
            sep = Run(block.sep, block.outer[: shared(outer, block.outer)])
            if size + units(sep.text) + length <= limit:
                current += [sep, *block.runs]
                size += units(sep.text) + length
                outer = block.outer
                continue
            messages.append(current)
        pieces = _split(block.runs, limit, units) if length > limit else [block.runs]
        messages.extend(pieces[:-1])
        current = list(pieces[-1])
        size = units("".join(run.text for run in current))
        outer = block.outer
    if current:
        messages.append(current)
    return messages


def joined(blocks: Sequence[Block]) -> list[Run]:
    """The blocks as one run list, their separators between them (no length limit)."""
    runs: list[Run] = []
    outer: Tags = ()
    for i, block in enumerate(blocks):
        if i:
            runs.append(Run(block.sep, block.outer[: shared(outer, block.outer)]))
        runs.extend(block.runs)
        outer = block.outer
    return runs


def spans(
    runs: Sequence[Run],
    opening: Callable[[Tag], str],
    closing: Callable[[Tag], str],
    shown: Callable[[Run], str],
    *,
    skip: frozenset[str] = frozenset(),
) -> str:
    """The runs in a platform's markup: a tag is opened (``opening``) where a run's tag stack
    starts to differ from the run before it and closed (``closing``) where it ends, innermost
    first, so every span opened here is closed here; ``shown`` writes a run's text (escaped);
    tags named in ``skip`` are left to ``shown``."""
    out: list[str] = []
    stack: Tags = ()
    for run in runs:
        if not run.text:
            continue
        tags = tuple(t for t in run.tags if t.name not in skip)
        keep = shared(stack, tags)
        out.extend(closing(tag) for tag in reversed(stack[keep:]))
        out.extend(opening(tag) for tag in tags[keep:])
        out.append(shown(run))
        stack = tags
    out.extend(closing(tag) for tag in reversed(stack))
    return "".join(out)


def links_of(citations: Sequence[Citation]) -> dict[int, str]:
    """Each citation number's web address (the first one given; http and https only)."""
    links: dict[int, str] = {}
    for citation in citations:
        url = web_url(citation.url)
        if url is not None:
            links.setdefault(citation.number, url)
    return links


def render(
    content: str,
    citations: Sequence[Citation],
    emit: Emitter,
    limit: int,
    *,
    units: Units = utf16_units,
    markup_counts: bool = False,
) -> list[str]:
    """An answer as a platform's messages: ``[n]`` markers linked to their sources, a numbered
    sources list at the end, packed at block boundaries into messages of at most ``limit``
    units of visible text, each emitted whole by ``emit`` (every span it opens closed in its
    message). With ``markup_counts`` the limit holds for the emitted text, markup included:
    the blocks are packed again with the excess taken off the budget until every message fits.

    An empty answer without sources gives an empty list; no message is blank.
    """
    blocks = markdown_blocks(content, links_of(citations)) + sources(citations)
    budget = limit
    while True:
        packed = pack(blocks, budget, units)
        chunks = [emit(runs) for runs in packed if "".join(run.text for run in runs).strip()]
        longest = max((units(chunk) for chunk in chunks), default=0)
        if not markup_counts or longest <= limit or budget <= limit // 8:
            return chunks
        budget -= max(longest - limit, limit // 50)


def tail(text: str, limit: int, units: Units = utf16_units) -> str:
    """``text`` cut to its last ``limit`` units, with a leading ``…`` when it was longer."""
    if units(text) <= limit:
        return text
    used, start = 0, len(text)
    while start > 0:
        width = units(text[start - 1])
        if used + width > limit - 1:
            break
        used, start = used + width, start - 1
    return "…" + text[start:]
