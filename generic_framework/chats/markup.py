"""GLM's markdown as blocks of styled runs, packed into a platform's messages.

A chat platform shows an answer in its own markup (Telegram an HTML subset, Discord its
markdown), with its own length limit, and refuses or mangles what it does not know. An answer's
text comes from the model and its sources' titles from the web, so none of it may reach a
message as markup. What every platform shares lives here; a platform writes only an *emitter*
(runs to its markup, escaping the text) and says how it counts a message's length.

The markdown is parsed by markdown-it-py (CommonMark, with strikethrough; raw HTML and entity
references are read as text) into tokens, and the tokens become *runs*: a piece of visible text
and the tags that hold it (``b``, ``i``, ``s``, ``code``, ``pre``, ``a href``, ``blockquote``,
named as in HTML). Lists become lines starting with ``•`` or their number, headings bold lines;
only http and https links become ``a``; ``[n]`` markers become links to their source.

The blocks (paragraphs, list items, code blocks, the sources) are packed into a platform's
messages by :mod:`generic_framework.chats.packing`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from generic_framework.core.reply import Citation

__all__ = [
    "BOLD",
    "Block",
    "Emitter",
    "Run",
    "Tag",
    "Tags",
    "Units",
    "code_points",
    "markdown_blocks",
    "shared",
    "sources",
    "utf16_units",
    "web_url",
]

_PARSER: Final = (
    MarkdownIt("commonmark", {"html": False})
    .enable("strikethrough")
    .disable(["entity", "reference"])
)
_WEB_SCHEMES: Final = frozenset({"http", "https"})
_CITATION: Final = re.compile(r"\[(\d{1,4})\]")
_LANGUAGE: Final = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_RULE: Final = "———"


@dataclass(frozen=True, slots=True)
class Tag:
    """One tag with at most one attribute (``a href``, ``code class``): what an emitter
    writes around a run's text."""

    name: str
    attr: str = ""
    value: str = ""


Tags = tuple[Tag, ...]
BOLD: Final = Tag("b")
_PRE: Final = Tag("pre")
_CODE: Final = Tag("code")
_QUOTE: Final = Tag("blockquote")
_INLINE: Final = {
    "strong_open": BOLD,
    "em_open": Tag("i"),
    "s_open": Tag("s"),
}


@dataclass(frozen=True, slots=True)
class Run:
    """Visible text and the tags around it, outermost first."""

    text: str
    tags: Tags = ()


@dataclass(slots=True)
class Block:
    """A unit the splitter keeps whole when it can: a paragraph, a list item, a code block.

    ``outer`` are the container tags (a blockquote) that the separator before the block may
    share with the block before it; ``sep`` is that separator's text.
    """

    runs: list[Run]
    outer: Tags = ()
    sep: str = "\n\n"


Units = Callable[[str], int]
"""How a platform counts a text's length."""
Emitter = Callable[[Sequence["Run"]], str]
"""A platform's markup for a message's runs (every span it opens closed, all text escaped)."""


def code_points(text: str) -> int:
    """Length in code points (as Discord counts a message)."""
    return len(text)


def utf16_units(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def shared(a: Tags, b: Tags) -> int:
    """How many outermost tags two stacks have in common."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def web_url(url: str) -> str | None:
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

    base: Tags
    stack: list[Tag | None] = field(default_factory=list)
    # Per open link: its target as text, how much text had been written when it opened, and
    # whether it is a link in the message.
    links: list[tuple[str, int, bool]] = field(default_factory=list)
    written: int = 0

    def tags(self) -> Tags:
        return self.base + tuple(t for t in self.stack if t is not None)

    def push(self, tag: Tag | None) -> None:
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
        self.blocks: list[Block] = []
        self.links = links
        self.quotes = 0
        self.lists: list[str] = []  # the marker of each open list: "•" or "." / ")"
        self.marker: str | None = None  # the pending marker of the current list item
        self.list_opened = False
        self.heading = False

    # -- blocks ---------------------------------------------------------------------------

    def feed(self, tokens: Sequence[Token]) -> list[Block]:
        for token in tokens:
            handler = getattr(self, "_on_" + token.type, None)
            if handler is not None:
                handler(token)
        return self.blocks

    def _outer(self) -> Tags:
        return (_QUOTE,) if self.quotes else ()

    def _add(self, runs: list[Run], outer: Tags) -> None:
        sep = "\n\n"
        if self.lists and not self.list_opened:
            sep = "\n"
        if self.lists:
            depth = len(self.lists) - 1
            if self.marker is not None:
                prefix = "   " * depth + self.marker + " "
            else:
                prefix = "   " * (depth + 1)
            runs = [Run(prefix, outer), *runs]
            self.marker = None
            self.list_opened = False
        self.blocks.append(Block(runs, outer, sep))

    def _on_heading_open(self, token: Token) -> None:
        self.heading = True

    def _on_heading_close(self, token: Token) -> None:
        self.heading = False

    def _on_inline(self, token: Token) -> None:
        outer = self._outer()
        base = (*outer, BOLD) if self.heading else outer
        runs = self._inline(token.children or [], base)
        if any(run.text.strip() for run in runs):
            self._add(runs, outer)

    def _code(self, token: Token) -> None:
        text = token.content.rstrip("\n")
        if not text.strip():
            return
        words = token.info.split()
        language = words[0] if words else ""
        tags: Tags = (_PRE,)
        if _LANGUAGE.fullmatch(language):
            tags = (_PRE, Tag("code", "class", "language-" + language))
        # Telegram keeps a code block out of a quote: the block is written after the quote.
        self._add([Run(text, tags)], ())

    _on_fence = _code
    _on_code_block = _code

    def _on_hr(self, token: Token) -> None:
        self._add([Run(_RULE, self._outer())], self._outer())

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

    def _inline(self, children: Sequence[Token], base: Tags) -> list[Run]:
        runs: list[Run] = []
        state = _Inline(base)
        for child in children:
            more = self._child(child, state)
            state.written += sum(len(run.text) for run in more)
            runs.extend(more)
        return runs

    def _child(self, token: Token, state: _Inline) -> list[Run]:
        kind = token.type
        if kind == "text":
            return self._text(token.content, state)
        if kind in ("softbreak", "hardbreak"):
            return [Run("\n", state.tags())]
        if kind == "code_inline":
            inner = () if state.in_link_or_code() else (_CODE,)
            return [Run(token.content, state.tags() + inner)]
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
            return [Run(token.content, state.tags())]
        return []

    def _text(self, text: str, state: _Inline) -> list[Run]:
        tags = state.tags()
        if not self.links or state.in_link_or_code():
            return [Run(text, tags)]
        runs: list[Run] = []
        start = 0
        for match in _CITATION.finditer(text):
            url = self.links.get(int(match.group(1)))
            if url is None:
                continue
            runs.append(Run(text[start : match.start()], tags))
            runs.append(Run(match.group(0), (*tags, Tag("a", "href", url))))
            start = match.end()
        runs.append(Run(text[start:], tags))
        return runs

    def _link_open(self, token: Token, state: _Inline) -> list[Run]:
        href = str(token.attrGet("href") or "")
        url = web_url(href)
        state.push(Tag("a", "href", url) if url else None)
        state.links.append((_PARSER.normalizeLinkText(href), state.written, url is not None))
        return []

    def _link_close(self, state: _Inline) -> list[Run]:
        href, written, linked = state.links.pop() if state.links else ("", 0, True)
        runs: list[Run] = []
        if state.written == written:  # [](target): the target is the text
            runs.append(Run(href, state.tags()))
        elif href and not linked:
            # A link Telegram would not open (mailto:, a relative path) keeps its target as text.
            runs.append(Run(f" ({href})", state.tags()))
        state.pop()
        return runs

    def _image(self, token: Token, state: _Inline) -> list[Run]:
        src = str(token.attrGet("src") or "")
        alt = token.content or src
        url = web_url(src)
        if url and not state.in_link_or_code():
            return [Run(alt, (*state.tags(), Tag("a", "href", url)))]
        src = _PARSER.normalizeLinkText(src)
        suffix = f" ({src})" if src and src != alt else ""
        return [Run(alt + suffix, state.tags())]


def markdown_blocks(markdown: str, links: dict[int, str]) -> list[Block]:
    return _Builder(links).feed(_PARSER.parse(markdown))


def sources(citations: Sequence[Citation]) -> list[Block]:
    """The numbered list of sources: a bold title, then one line per source."""
    if not citations:
        return []
    blocks = [Block([Run("Sources", (BOLD,))])]
    for citation in citations:
        url = web_url(citation.url)
        title = citation.title.strip() or citation.site.strip() or citation.url.strip()
        title = title or f"Source {citation.number}"
        runs = [Run(f"{citation.number}. ")]
        runs.append(Run(title, (Tag("a", "href", url),) if url else ()))
        site = citation.site.strip()
        if site and site != title:
            runs.append(Run(f" ({site})"))
        blocks.append(Block(runs, sep="\n"))
    return blocks
