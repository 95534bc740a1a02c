"""GLM's markdown as Telegram messages: the HTML subset of the Bot API, escaped and split.

Telegram's ``parse_mode=HTML`` knows a handful of tags (``b``, ``i``, ``s``, ``code``, ``pre``,
``a href``, ``blockquote``...), no lists and no headings, and refuses a whole message when one
tag is unknown or unbalanced or one ``<`` or ``&`` is left bare. The answer's runs come from
:mod:`generic_framework.chats.markup` (whose tags are named as Telegram's); text is escaped only
where runs become HTML (:func:`_html`), which opens and closes tags from the runs' tag stacks,
so every tag it writes is one of ours and closed, whatever the input. Messages are at most
:data:`MESSAGE_LIMIT` UTF-16 code units of visible text, which is how Telegram counts a message
after parsing its entities (docs/design/0613).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from generic_framework.chats.markup import Run, Tag, markdown_blocks
from generic_framework.chats.packing import joined, render, spans, tail
from generic_framework.core.reply import Citation

__all__ = ["MESSAGE_LIMIT", "escape", "render_answer", "render_draft", "to_html"]

MESSAGE_LIMIT: Final = 4096
"""Telegram's limit on a message's text: UTF-16 code units after entity parsing."""


def escape(text: str) -> str:
    """Escape ``&``, ``<``, ``>`` and ``"`` for Telegram's HTML, in text and in attributes."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _open(tag: Tag) -> str:
    if not tag.attr:
        return f"<{tag.name}>"
    return f'<{tag.name} {tag.attr}="{escape(tag.value)}">'


def _html(runs: Sequence[Run]) -> str:
    """The runs as HTML: every tag opened here is closed here, all text escaped."""
    return spans(runs, _open, lambda tag: f"</{tag.name}>", lambda run: escape(run.text))


def to_html(markdown: str) -> str:
    """GLM's markdown as Telegram HTML, whole (no length limit, ``[n]`` markers left as text)."""
    return _html(joined(markdown_blocks(markdown, {})))


def render_answer(content: str, citations: Sequence[Citation]) -> list[str]:
    """The final answer: HTML chunks, each <= MESSAGE_LIMIT characters of text after entity
    parsing AND a valid, self-contained HTML document (every tag closed in its chunk); [n] markers
    linked to citation n's URL (only http/https URLs; others left as plain [n]); a numbered
    'Sources' list at the end (escaped titles, links). Split at paragraph or code-block
    boundaries, never inside an entity; a single over-long paragraph/code block is split at line,
    then word, then character boundaries, re-opening <pre><code> in the next chunk.

    An empty answer without sources gives an empty list; no chunk is blank.
    """
    return render(content, citations, _html, MESSAGE_LIMIT)


def render_draft(text: str) -> str:
    """A partial answer for a live draft or edit: plain escaped text (no tags), cut to its last
    MESSAGE_LIMIT characters (UTF-16 units) with a leading '…' when longer."""
    return escape(tail(text, MESSAGE_LIMIT))
