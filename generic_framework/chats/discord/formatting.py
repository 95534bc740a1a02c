"""GLM's markdown as Discord messages: Discord's markdown, escaped, linked and split.

The runs of :mod:`generic_framework.chats.markup` become Discord markdown: ``**bold**``,
``*italic*``, ``~~struck~~``, inline code and fenced code blocks, ``> `` quotes, and links as
``[text](<url>)`` (the angle brackets keep Discord from embedding a preview; the messages are
sent with embeds suppressed too). All other text is escaped with backslashes, so an answer or a
source title cannot inject markup, a mention (``<@id>``, ``<#channel>``) or a masked link, and
``@everyone`` / ``@here`` get a zero-width space after the ``@`` (the messages also allow no
mentions at all). Discord's limit, :data:`MESSAGE_LIMIT` characters, counts the markup too, so
the answer is packed by :func:`~generic_framework.chats.packing.render` until every message fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from generic_framework.chats.markup import Run, Tag, code_points
from generic_framework.chats.packing import render, spans, tail
from generic_framework.core.reply import Citation

__all__ = ["MESSAGE_LIMIT", "escape", "render_answer", "render_draft"]

MESSAGE_LIMIT: Final = 2000
"""Discord's limit on a message's content, in characters, markup included."""
_SPECIAL: Final = re.compile(r"([\\*_~`|\[\]()<])")
_LINE_START: Final = re.compile(r"(?m)^(\s*)([#>+\-])")  # a heading, a quote, a list
_LIST_NUMBER: Final = re.compile(r"(?m)^(\s*\d+)\.")
_PINGS: Final = re.compile(r"@(everyone|here)", re.IGNORECASE)
_MARKS: Final = {"b": "**", "i": "*", "s": "~~"}
_BROKEN_FENCE: Final = "``\u200b`"  # a fence inside a code block, kept from closing it


def escape(text: str) -> str:
    """``text`` shown as itself in Discord: markdown, mentions and everyone-pings defused."""
    text = _SPECIAL.sub(r"\\\1", text)
    text = _LIST_NUMBER.sub(r"\1\\.", _LINE_START.sub(r"\1\\\2", text))
    return _PINGS.sub("@\u200b\\1", text)


def _code(text: str, block: bool, language: str) -> str:
    if block:
        body = text.replace("```", _BROKEN_FENCE)
        return f"```{language}\n{body}\n```"
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _open(tag: Tag) -> str:
    if tag.name == "a":
        return "["
    if tag.name == "blockquote":
        return "> "
    return _MARKS.get(tag.name, "")


def _close(tag: Tag) -> str:
    if tag.name == "a":
        return "](<" + tag.value.replace(">", "%3E").replace(")", "%29") + ">)"
    return _MARKS.get(tag.name, "")


def _text(run: Run) -> str:
    names = [tag.name for tag in run.tags]
    if "pre" in names:
        language = next((t.value[9:] for t in run.tags if t.value.startswith("language-")), "")
        return _code(run.text, True, language)
    if "code" in names:
        return _code(run.text, False, "")
    shown = escape(run.text)
    return shown.replace("\n", "\n> ") if "blockquote" in names else shown


def _markdown(runs: Sequence[Run]) -> str:
    """The runs as Discord markdown: every span opened here is closed here."""
    return spans(runs, _open, _close, _text, skip=frozenset({"code", "pre"}))


def render_answer(content: str, citations: Sequence[Citation]) -> list[str]:
    """The final answer as Discord messages of at most :data:`MESSAGE_LIMIT` characters
    (markup included), ``[n]`` linked to their sources, a numbered sources list at the end,
    split at paragraph or code-block boundaries, never inside a span."""
    return render(
        content, citations, _markdown, MESSAGE_LIMIT, units=code_points, markup_counts=True
    )


def render_draft(text: str) -> str:
    """A partial answer for a live edit: escaped text, its last part when it is long (escaping
    at most doubles it, so half the limit always fits)."""
    return escape(tail(text, MESSAGE_LIMIT // 2, code_points))
