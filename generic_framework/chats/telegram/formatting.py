"""GLM's markdown as Telegram messages: the HTML subset of the Bot API, escaped and split.

Telegram's ``parse_mode=HTML`` knows a handful of tags (``b``, ``i``, ``s``, ``code``, ``pre``,
``a href``, ``blockquote``...), no lists and no headings, and refuses a whole message when one
tag is unknown or unbalanced or one ``<`` or ``&`` is left bare. An answer's text comes from the
model and its sources' titles from the web, so none of it may reach the message as markup.

The markdown is parsed by markdown-it-py (CommonMark, with strikethrough; raw HTML and entity
references are read as text) into tokens, and the tokens become *runs*: a piece of visible text
and the tags that hold it. Text is escaped only where runs become HTML (:func:`_html`), which
opens and closes tags from the runs' tag stacks, so every tag it writes is one of ours and
closed, whatever the input. Lists become lines starting with ``•`` or their number, headings bold
lines; code blocks ``<pre><code class="language-x">``; only http and https links become ``<a>``.

Splitting works on the same runs (docs/design/0613): blocks (paragraphs, list items, code
blocks, the sources) are packed into messages of at most :data:`MESSAGE_LIMIT` UTF-16 code units
of visible text, which is how Telegram counts a message after parsing its entities. A block
longer than that alone is cut at its last line break, else its last space, else anywhere
between two code points; each piece's tags are closed at its end and opened again in the next
message, so a long code block continues as a code block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from generic_framework.core.reply import Citation

__all__ = ["MESSAGE_LIMIT", "escape", "render_answer", "render_draft", "to_html"]

MESSAGE_LIMIT: Final = 4096
"""Telegram's limit on a message's text: UTF-16 code units after entity parsing."""

_PARSER: Final = (
    MarkdownIt("commonmark", {"html": False})
    .enable("strikethrough")
    .disable(["entity", "reference"])
)
_WEB_SCHEMES: Final = frozenset({"http", "https"})
_CITATION: Final = re.compile(r"\[(\d{1,4})\]")
_LANGUAGE: Final = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_RULE: Final = "———"


def escape(text: str) -> str:
    """Escape ``&``, ``<``, ``>`` and ``"`` for Telegram's HTML, in text and in attributes."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


@dataclass(frozen=True, slots=True)
class _Tag:
    """One tag with at most one attribute (all Telegram needs)."""

    name: str
    attr: str = ""
    value: str = ""

    def open(self) -> str:
        if not self.attr:
            return f"<{self.name}>"
        return f'<{self.name} {self.attr}="{escape(self.value)}">'

    def close(self) -> str:
        return f"</{self.name}>"


_Tags = tuple[_Tag, ...]
_BOLD: Final = _Tag("b")
_PRE: Final = _Tag("pre")
_CODE: Final = _Tag("code")
_QUOTE: Final = _Tag("blockquote")
_INLINE: Final = {
    "strong_open": _BOLD,
    "em_open": _Tag("i"),
    "s_open": _Tag("s"),
}


@dataclass(frozen=True, slots=True)
class _Run:
    """Visible text and the tags around it, outermost first."""

    text: str
    tags: _Tags = ()


@dataclass(slots=True)
class _Block:
    """A unit the splitter keeps whole when it can: a paragraph, a list item, a code block.

    ``outer`` are the container tags (a blockquote) that the separator before the block may
    share with the block before it; ``sep`` is that separator's text.
    """

    runs: list[_Run]
    outer: _Tags = ()
    sep: str = "\n\n"


def _units(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _shared(a: _Tags, b: _Tags) -> int:
    """How many outermost tags two stacks have in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _html(runs: Iterable[_Run]) -> str:
    """The runs as HTML: every tag opened here is closed here, all text escaped."""
    out: list[str] = []
    stack: _Tags = ()
    for run in runs:
        if not run.text:
            continue
        keep = _shared(stack, run.tags)
        out.extend(tag.close() for tag in reversed(stack[keep:]))
        out.extend(tag.open() for tag in run.tags[keep:])
        out.append(escape(run.text))
        stack = run.tags
    out.extend(tag.close() for tag in reversed(stack))
    return "".join(out)


def _web_url(url: str) -> str | None:
    """``url`` normalised as markdown-it does for links (percent-encoded: no space, quote or
    angle bracket is left), or None unless it is an http(s) address with a host."""
    try:
        url = _PARSER.normalizeLink(url.strip())
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in _WEB_SCHEMES or not parts.hostname:
        return None
    return url


@dataclass(slots=True)
class _Inline:
    """The tag stack of one inline token stream (a paragraph's, a heading's)."""

    base: _Tags
    stack: list[_Tag | None] = field(default_factory=list)
    # Per open link: its target as text, how much text had been written when it opened, and
    # whether it is a link in the message.
    links: list[tuple[str, int, bool]] = field(default_factory=list)
    written: int = 0

    def tags(self) -> _Tags:
        return self.base + tuple(t for t in self.stack if t is not None)

    def push(self, tag: _Tag | None) -> None:
        # A tag already open (bold inside a heading, a link inside a link) is not opened twice.
        self.stack.append(None if tag is None or tag in self.tags() else tag)

    def pop(self) -> None:
        if self.stack:
            self.stack.pop()

    def in_link_or_code(self) -> bool:
        return any(t.name in ("a", "code") for t in self.tags())


class _Builder:
    """Turns markdown-it's token stream into blocks of runs."""

    def __init__(self, links: dict[int, str]) -> None:
        self.blocks: list[_Block] = []
        self.links = links
        self.quotes = 0
        self.lists: list[str] = []  # the marker of each open list: "•" or "." / ")"
        self.marker: str | None = None  # the pending marker of the current list item
        self.list_opened = False
        self.heading = False

    # -- blocks ---------------------------------------------------------------------------

    def feed(self, tokens: Sequence[Token]) -> list[_Block]:
        for token in tokens:
            handler = getattr(self, "_on_" + token.type, None)
            if handler is not None:
                handler(token)
        return self.blocks

    def _outer(self) -> _Tags:
        return (_QUOTE,) if self.quotes else ()

    def _add(self, runs: list[_Run], outer: _Tags) -> None:
        sep = "\n\n"
        if self.lists and not self.list_opened:
            sep = "\n"
        if self.lists:
            depth = len(self.lists) - 1
            if self.marker is not None:
                prefix = "   " * depth + self.marker + " "
            else:
                prefix = "   " * (depth + 1)
            runs = [_Run(prefix, outer), *runs]
            self.marker = None
            self.list_opened = False
        self.blocks.append(_Block(runs, outer, sep))

    def _on_heading_open(self, token: Token) -> None:
        self.heading = True

    def _on_heading_close(self, token: Token) -> None:
        self.heading = False

    def _on_inline(self, token: Token) -> None:
        outer = self._outer()
        base = (*outer, _BOLD) if self.heading else outer
        runs = self._inline(token.children or [], base)
        if any(run.text.strip() for run in runs):
            self._add(runs, outer)

    def _code(self, token: Token) -> None:
        text = token.content.rstrip("\n")
        if not text.strip():
            return
        words = token.info.split()
        language = words[0] if words else ""
        tags: _Tags = (_PRE,)
        if _LANGUAGE.fullmatch(language):
            tags = (_PRE, _Tag("code", "class", "language-" + language))
        # Telegram keeps a code block out of a quote: the block is written after the quote.
        self._add([_Run(text, tags)], ())

    _on_fence = _code
    _on_code_block = _code

    def _on_hr(self, token: Token) -> None:
        self._add([_Run(_RULE, self._outer())], self._outer())

    def _on_blockquote_open(self, token: Token) -> None:
        self.quotes += 1

    def _on_blockquote_close(self, token: Token) -> None:
        self.quotes -= 1

    def _on_bullet_list_open(self, token: Token) -> None:
        self.lists.append("•")
        self.list_opened = len(self.lists) == 1

    def _on_ordered_list_open(self, token: Token) -> None:
        self.lists.append(token.markup or ".")
        self.list_opened = len(self.lists) == 1

    def _on_bullet_list_close(self, token: Token) -> None:
        self.lists.pop()

    _on_ordered_list_close = _on_bullet_list_close

    def _on_list_item_open(self, token: Token) -> None:
        kind = self.lists[-1] if self.lists else "•"
        self.marker = kind if kind == "•" else f"{token.info or '1'}{kind}"

    # -- inline ---------------------------------------------------------------------------

    def _inline(self, children: Sequence[Token], base: _Tags) -> list[_Run]:
        runs: list[_Run] = []
        state = _Inline(base)
        for child in children:
            more = self._child(child, state)
            state.written += sum(len(run.text) for run in more)
            runs.extend(more)
        return runs

    def _child(self, token: Token, state: _Inline) -> list[_Run]:
        kind = token.type
        if kind == "text":
            return self._text(token.content, state)
        if kind in ("softbreak", "hardbreak"):
            return [_Run("\n", state.tags())]
        if kind == "code_inline":
            inner = () if state.in_link_or_code() else (_CODE,)
            return [_Run(token.content, state.tags() + inner)]
        if kind == "link_open":
            return self._link_open(token, state)
        if kind == "link_close":
            return self._link_close(state)
        if kind == "image":
            return self._image(token, state)
        if kind.endswith("_open"):
            state.push(_INLINE.get(kind))
        elif kind.endswith("_close"):
            state.pop()
        else:
            return [_Run(token.content, state.tags())]
        return []

    def _text(self, text: str, state: _Inline) -> list[_Run]:
        tags = state.tags()
        if not self.links or state.in_link_or_code():
            return [_Run(text, tags)]
        runs: list[_Run] = []
        start = 0
        for match in _CITATION.finditer(text):
            url = self.links.get(int(match.group(1)))
            if url is None:
                continue
            runs.append(_Run(text[start : match.start()], tags))
            runs.append(_Run(match.group(0), (*tags, _Tag("a", "href", url))))
            start = match.end()
        runs.append(_Run(text[start:], tags))
        return runs

    def _link_open(self, token: Token, state: _Inline) -> list[_Run]:
        href = str(token.attrGet("href") or "")
        url = _web_url(href)
        state.push(_Tag("a", "href", url) if url else None)
        state.links.append((_PARSER.normalizeLinkText(href), state.written, url is not None))
        return []

    def _link_close(self, state: _Inline) -> list[_Run]:
        href, written, linked = state.links.pop() if state.links else ("", 0, True)
        runs: list[_Run] = []
        if state.written == written:  # [](target): the target is the text
            runs.append(_Run(href, state.tags()))
        elif href and not linked:
            # A link Telegram would not open (mailto:, a relative path) keeps its target as text.
            runs.append(_Run(f" ({href})", state.tags()))
        state.pop()
        return runs

    def _image(self, token: Token, state: _Inline) -> list[_Run]:
        src = str(token.attrGet("src") or "")
        alt = token.content or src
        url = _web_url(src)
        if url and not state.in_link_or_code():
            return [_Run(alt, (*state.tags(), _Tag("a", "href", url)))]
        src = _PARSER.normalizeLinkText(src)
        suffix = f" ({src})" if src and src != alt else ""
        return [_Run(alt + suffix, state.tags())]


def _blocks(markdown: str, links: dict[int, str]) -> list[_Block]:
    return _Builder(links).feed(_PARSER.parse(markdown))


def _sources(citations: Sequence[Citation]) -> list[_Block]:
    """The numbered list of sources: a bold title, then one line per source."""
    if not citations:
        return []
    blocks = [_Block([_Run("Sources", (_BOLD,))])]
    for citation in citations:
        url = _web_url(citation.url)
        title = citation.title.strip() or citation.site.strip() or citation.url.strip()
        title = title or f"Source {citation.number}"
        runs = [_Run(f"{citation.number}. ")]
        runs.append(_Run(title, (_Tag("a", "href", url),) if url else ()))
        site = citation.site.strip()
        if site and site != title:
            runs.append(_Run(f" ({site})"))
        blocks.append(_Block(runs, sep="\n"))
    return blocks


def _cut(text: str, limit: int) -> tuple[int, int]:
    """Where to cut ``text`` to keep at most ``limit`` units: (end of head, start of tail)."""
    units = 0
    fits = 0
    for i, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            break
        fits = i + 1
    for sep in ("\n", " "):
        at = text.rfind(sep, 0, fits + 1)
        if at > 0:
            return at, at + 1
    return max(fits, 1), max(fits, 1)


def _slice(runs: Sequence[_Run], start: int, end: int) -> list[_Run]:
    """The runs covering code points ``start:end`` of their joined text."""
    out: list[_Run] = []
    pos = 0
    for run in runs:
        lo, hi = max(start - pos, 0), min(end - pos, len(run.text))
        if lo < hi:
            out.append(_Run(run.text[lo:hi], run.tags))
        pos += len(run.text)
    return out


def _split(runs: list[_Run], limit: int) -> list[list[_Run]]:
    """One over-long block as pieces of at most ``limit`` units each."""
    pieces: list[list[_Run]] = []
    text = "".join(run.text for run in runs)
    while _units(text) > limit:
        head, tail = _cut(text, limit)
        pieces.append(_slice(runs, 0, head))
        runs = _slice(runs, tail, len(text))
        text = text[tail:]
    pieces.append(runs)
    return pieces


def _pack(blocks: Sequence[_Block], limit: int) -> list[list[_Run]]:
    """Blocks packed into messages of at most ``limit`` units, split only when one is too long."""
    messages: list[list[_Run]] = []
    current: list[_Run] = []
    size = 0
    outer: _Tags = ()
    for block in blocks:
        length = _units("".join(run.text for run in block.runs))
        if current:
            sep = _Run(block.sep, block.outer[: _shared(outer, block.outer)])
            if size + _units(sep.text) + length <= limit:
                current += [sep, *block.runs]
                size += _units(sep.text) + length
                outer = block.outer
                continue
            messages.append(current)
        pieces = _split(block.runs, limit) if length > limit else [block.runs]
        messages.extend(pieces[:-1])
        current = list(pieces[-1])
        size = _units("".join(run.text for run in current))
        outer = block.outer
    if current:
        messages.append(current)
    return messages


def _joined(blocks: Sequence[_Block]) -> list[_Run]:
    runs: list[_Run] = []
    outer: _Tags = ()
    for i, block in enumerate(blocks):
        if i:
            runs.append(_Run(block.sep, block.outer[: _shared(outer, block.outer)]))
        runs.extend(block.runs)
        outer = block.outer
    return runs


def to_html(markdown: str) -> str:
    """GLM's markdown as Telegram HTML, whole (no length limit, ``[n]`` markers left as text)."""
    return _html(_joined(_blocks(markdown, {})))


def render_answer(content: str, citations: Sequence[Citation]) -> list[str]:
    """The final answer: HTML chunks, each <= MESSAGE_LIMIT characters of text after entity
    parsing AND a valid, self-contained HTML document (every tag closed in its chunk); [n] markers
    linked to citation n's URL (only http/https URLs; others left as plain [n]); a numbered
    'Sources' list at the end (escaped titles, links). Split at paragraph or code-block
    boundaries, never inside an entity; a single over-long paragraph/code block is split at line,
    then word, then character boundaries, re-opening <pre><code> in the next chunk.

    An empty answer without sources gives an empty list; no chunk is blank.
    """
    links: dict[int, str] = {}
    for citation in citations:
        url = _web_url(citation.url)
        if url is not None:
            links.setdefault(citation.number, url)
    blocks = _blocks(content, links) + _sources(citations)
    chunks = _pack(blocks, MESSAGE_LIMIT)
    return [_html(runs) for runs in chunks if "".join(r.text for r in runs).strip()]


def render_draft(text: str) -> str:
    """A partial answer for a live draft or edit: plain escaped text (no tags), cut to its last
    MESSAGE_LIMIT characters (UTF-16 units) with a leading '…' when longer."""
    if _units(text) > MESSAGE_LIMIT:
        units, start = 0, len(text)
        while start > 0:
            width = 2 if ord(text[start - 1]) > 0xFFFF else 1
            if units + width > MESSAGE_LIMIT - 1:
                break
            units, start = units + width, start - 1
        text = "…" + text[start:]
    return escape(text)
