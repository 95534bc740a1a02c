"""GLM's markdown as Discord messages on their own: escapes that keep hostile text from pinging
or formatting, links kept from embedding, and splitting within Discord's 2,000 characters where
the markup counts too (the end-to-end tests send these through discord.py to the fake)."""

from __future__ import annotations

import re

from generic_framework.chats.discord.formatting import (
    MESSAGE_LIMIT,
    escape,
    render_answer,
    render_draft,
)
from generic_framework.core.reply import Citation


def test_hostile_text_shows_as_written_and_pings_nobody() -> None:
    shown = escape("@everyone @HERE <@123> <#45> **bold** [x](https://evil.example) # title")
    assert "@everyone" not in shown and "@HERE" not in shown
    assert "\\<@123>" in shown and "\\<#45>" in shown
    assert "\\*\\*bold\\*\\*" in shown
    assert "\\[x\\]\\(https://evil.example\\)" in shown
    assert shown.endswith(" # title")  # mid-line: not a heading, left alone
    assert escape("# title\n- item\n1. first") == "\\# title\n\\- item\n1\\. first"


def test_sources_are_linked_without_embeds_and_titles_are_escaped() -> None:
    source = Citation(
        number=1, url="https://weather.example/a)b>c", title="@everyone *now*", site="w.example"
    )
    (message,) = render_answer("Mild today [1].", [source])
    assert "[\\[1\\]](<https://weather.example/a%29b%3Ec>)" in message
    assert "@\u200beveryone \\*now\\*" in message
    assert message.count("**Sources**") == 1


def test_a_long_answer_is_split_within_the_limit_and_no_span_is_cut() -> None:
    paragraphs = [f"**Point {n}.** " + "tide and_moon " * 25 for n in range(60)]
    code = "```python\n" + "\n".join(f"print({n})  # *" for n in range(300)) + "\n```"
    chunks = render_answer("\n\n".join(paragraphs) + "\n\n" + code, [])
    assert len(chunks) > 3
    assert all(len(chunk) <= MESSAGE_LIMIT for chunk in chunks)
    for chunk in chunks:
        outside = re.sub(r"```.*?```", "", chunk, flags=re.DOTALL)
        assert chunk.count("```") % 2 == 0  # a code block is closed and opened again
        assert outside.replace("\\*", "").count("**") % 2 == 0
    joined = "".join(chunks)
    assert all(f"**Point {n}.**" in joined for n in range(60))
    assert all(f"print({n})" in joined for n in range(300))


def test_a_draft_is_escaped_and_within_the_limit() -> None:
    draft = render_draft("<@1> " + "x" * 5000)
    assert len(draft) <= MESSAGE_LIMIT and draft.startswith("…")
    assert render_draft("@here") == "@\u200bhere"
