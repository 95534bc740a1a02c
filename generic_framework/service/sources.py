"""The "Sources" footer of ``/v1/chat/completions``: a reply's citations as a markdown list.

Stock OpenAI clients show ``message.content`` and nothing else, so the sources go there, after
the answer whose ``[n]`` markers point at them::

    Light rain and 9 degrees [1].

    Sources:
    1. [Nanaimo weather](https://weather.example.org/nanaimo)

Titles and URLs come from web pages, so neither is trusted. A title is put on one line and its
markdown characters are escaped, so it cannot close the link, open another one, emphasise or
inject HTML. Only an absolute ``http``/``https`` URL becomes a link, with the characters that
would end a link destination early percent-encoded; any other URL (``javascript:``, ``data:``,
relative, unparsable) is left out and the title is shown as plain text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from generic_framework.core.reply import Citation
from generic_framework.service.schemas import AnnotationOut, UrlCitationOut

__all__ = ["safe_link", "safe_title", "sources_footer", "strip_sources_footer", "url_citations"]

_MARKDOWN = re.compile(r"([\\`*_\[\]<>|~!#&])")
_SPACES = re.compile(r"\s+")
_MAX_TITLE = 300
_LINK_BREAKERS = frozenset(" ()<>\"'`\\")


def safe_title(text: str) -> str:
    """``text`` on one line, at most 300 characters, with markdown's characters escaped."""
    flat = _SPACES.sub(" ", "".join(c if c.isprintable() else " " for c in text)).strip()
    if len(flat) > _MAX_TITLE:
        flat = flat[: _MAX_TITLE - 1].rstrip() + "\u2026"
    return _MARKDOWN.sub(r"\\\1", flat)


def safe_link(url: str) -> str | None:
    """``url`` fit for a markdown link destination, or None unless it is absolute http(s)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in {"http", "https"} or not parts.hostname:
        return None
    return "".join(
        f"%{ord(c):02X}" if c in _LINK_BREAKERS or ord(c) < 0x20 or ord(c) == 0x7F else c
        for c in parts.geturl()
    )


def _line(citation: Citation) -> str:
    link = safe_link(citation.url)
    host = urlsplit(link).hostname if link else None
    label = citation.title.strip() or citation.site.strip() or host or f"source {citation.number}"
    title = safe_title(label)
    return f"{citation.number}. [{title}]({link})" if link else f"{citation.number}. {title}"


def sources_footer(citations: Sequence[Citation]) -> str:
    """``"\\n\\nSources:\\n1. [title](url)\\n..."`` for ``citations``; ``""`` if none."""
    if not citations:
        return ""
    return "\n\nSources:\n" + "\n".join(_line(c) for c in citations)


_FOOTER_HEAD = "\n\nSources:\n"
_FOOTER_LINE = re.compile(r"\d+\. \S.*")
_CITED = re.compile(r"\[(\d{1,4})\]")


def strip_sources_footer(text: str) -> str:
    """``text`` without the "Sources:" list :func:`sources_footer` appended to it, if it ends
    with one (every line after the heading a numbered entry); otherwise ``text`` unchanged.

    An OpenAI client sends the service's earlier answers back as history, footer included; the
    model is sent them as the stored history holds them, without it.
    """
    at = text.rfind(_FOOTER_HEAD)
    if at < 0:
        return text
    lines = text[at + len(_FOOTER_HEAD) :].rstrip().split("\n")
    if lines and all(_FOOTER_LINE.fullmatch(line.strip()) for line in lines):
        return text[:at]
    return text


def url_citations(content: str, citations: Sequence[Citation]) -> list[AnnotationOut]:
    """OpenAI's ``url_citation`` annotations of ``content``: one per ``[n]`` marker citing a
    source with an ``http(s)`` URL, ``content[start_index:end_index] == "[n]"``, in order.

    Indexes count Unicode code points (Python's ``str`` indexes; JavaScript counts UTF-16 code
    units, which differ only past the Basic Multilingual Plane). The title is the footer's
    label (title, else site, else host), unescaped.
    """
    if not citations or "[" not in content:
        return []
    sources = {c.number: c for c in citations}
    found = []
    for match in _CITED.finditer(content):
        source = sources.get(int(match.group(1)))
        link = safe_link(source.url) if source is not None else None
        if source is None or link is None:
            continue
        title = source.title.strip() or source.site.strip() or urlsplit(link).hostname or link
        found.append(
            AnnotationOut(
                url_citation=UrlCitationOut(
                    url=link, title=title, start_index=match.start(), end_index=match.end()
                )
            )
        )
    return found
