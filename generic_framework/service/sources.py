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

__all__ = ["safe_link", "safe_title", "sources_footer"]

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
