"""Printing replies: the answer (markdown on a terminal, plain text when piped) and its sources."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from generic_framework.core.reply import Citation, Reply

__all__ = ["print_reply", "print_sources"]


def print_reply(reply: Reply, out: TextIO) -> None:
    """Print the answer and its sources (see :func:`print_sources`)."""
    if out.isatty():
        from rich.console import Console
        from rich.markdown import Markdown

        Console(file=out).print(Markdown(reply.content))
    else:
        out.write(reply.content.rstrip() + "\n")
    print_sources(reply.citations, out)


def print_sources(citations: Sequence[Citation], out: TextIO) -> None:
    """Print ``Sources:`` and one numbered line per citation; nothing when there are none."""
    if citations:
        out.write("\nSources:\n")
        for citation in citations:
            title = citation.title or citation.site or citation.url
            out.write(f"  [{citation.number}] {title} - {citation.url}\n")
    out.flush()
