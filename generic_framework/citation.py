"""Citation: one numbered source of an answer, the one shape of a source everywhere.

A :class:`~generic_framework.core.reply.Reply` carries its citations, the stored turn's
:class:`~generic_framework.store.base.TurnRecord` keeps the same objects as its ``sources``,
and the API shows them (``citations`` of a reply and of a stored turn's record). It sits below
both the core and the store (the store may not import the core), beside
:mod:`generic_framework.limits`.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["Citation"]


class Citation(BaseModel):
    """One numbered source of an answer.

    Attributes:
        number: 1..n, as cited in :attr:`Reply.content` (``[1]``).
        title: the page title (may be empty).
        url: the page address (some search engines leave it empty).
        site: the site or publication name.
        snippet: the summary the search engine returned.
        published: the publication date as given (free text, often empty).
        ref: the label the model cited (``ref_1``) before it was rewritten to ``[number]``.
    """

    number: int
    title: str = ""
    url: str = ""
    site: str = ""
    snippet: str = ""
    published: str = ""
    ref: str = ""
