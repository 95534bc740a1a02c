"""GLM's markdown as Telegram HTML: each construct, the sources, splitting, drafts, and markup
injection, checked against a strict reading of the Bot API's HTML subset (``_parse`` below).

The checker is stricter than Telegram where Telegram is lenient: a bare ``>`` or ``&``, an
unknown entity, an attribute Telegram ignores or a ``code`` class outside ``pre`` all fail.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from generic_framework.chats.telegram import formatting
from generic_framework.chats.telegram.formatting import (
    MESSAGE_LIMIT,
    escape,
    render_answer,
    render_draft,
    to_html,
)
from generic_framework.core.reply import Citation

# The Bot API's tags (https://core.telegram.org/bots/api#html-style) and their attributes.
_TELEGRAM_TAGS = {
    "b": set(),
    "strong": set(),
    "i": set(),
    "em": set(),
    "u": set(),
    "ins": set(),
    "s": set(),
    "strike": set(),
    "del": set(),
    "span": {"class"},
    "tg-spoiler": set(),
    "a": {"href"},
    "code": {"class"},
    "pre": set(),
    "blockquote": {"expandable"},
}
# What the formatter itself may write.
_OURS = {"b", "i", "s", "a", "code", "pre", "blockquote"}

_TOKEN = re.compile(
    r"<(?P<close>/?)(?P<name>[a-z-]+)(?P<attrs>(?:\s+[a-z-]+(?:=\"[^\"<>]*\")?)*)\s*>"
    r"|(?P<entity>&(?:lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});)"
    r"|(?P<text>[^<>&]+)"
)
_ATTR = re.compile(r"([a-z-]+)(?:=\"([^\"<>]*)\")?")


class BadHTML(AssertionError):
    pass


@dataclass
class Parsed:
    text: str = ""
    tags: list[str] = field(default_factory=list)
    hrefs: list[str] = field(default_factory=list)


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _check_language(value: str, parent: str) -> None:
    if parent != "pre" or not re.fullmatch(r"language-[\w+#.-]+", value):
        raise BadHTML(f"code class {value!r} in <{parent}>")


def _check_open(name: str, attrs: dict[str, str], stack: list[str]) -> None:
    if name not in _TELEGRAM_TAGS:
        raise BadHTML(f"unknown tag <{name}>")
    if not set(attrs) <= _TELEGRAM_TAGS[name]:
        raise BadHTML(f"attributes {sorted(attrs)} on <{name}>")
    parent = stack[-1] if stack else ""
    if parent == "code" or (parent == "pre" and name != "code"):
        raise BadHTML(f"<{name}> inside <{parent}>")
    if name in stack and name in ("a", "blockquote", "pre", "code"):
        raise BadHTML(f"<{name}> nested in itself")
    # Links, code blocks and quotes contain no each other (inline code in a quote is fine).
    if (name == "pre" and "blockquote" in stack) or (name == "code" and "a" in stack):
        raise BadHTML(f"<{name}> inside {stack}")
    if name == "a" and {"code", "pre"} & set(stack):
        raise BadHTML(f"<a> inside {stack}")
    if name == "a":
        url = attrs.get("href", "")
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise BadHTML(f"link to {url!r}")
    if name == "code" and "class" in attrs:
        _check_language(attrs["class"], parent)
    if name == "span" and attrs.get("class") != "tg-spoiler":
        raise BadHTML("span without tg-spoiler")


def _parse(document: str) -> Parsed:
    """Read one message as Telegram would, strictly; raise BadHTML on anything it might refuse."""
    parsed = Parsed()
    stack: list[str] = []
    pos = 0
    while pos < len(document):
        match = _TOKEN.match(document, pos)
        if match is None:
            raise BadHTML(f"bare {document[pos]!r} at {pos} in {document[pos : pos + 40]!r}")
        pos = match.end()
        if match["text"] is not None:
            parsed.text += match["text"]
        elif match["entity"] is not None:
            parsed.text += html.unescape(match["entity"])
        elif match["close"]:
            if not stack or stack[-1] != match["name"]:
                raise BadHTML(f"</{match['name']}> closes {stack[-1:]}")
            stack.pop()
        else:
            attrs = {k: html.unescape(v) for k, v in _ATTR.findall(match["attrs"])}
            _check_open(match["name"], attrs, stack)
            stack.append(match["name"])
            parsed.tags.append(match["name"])
            if match["name"] == "a":
                parsed.hrefs.append(attrs["href"])
    if stack:
        raise BadHTML(f"unclosed {stack}")
    return parsed


def _message(document: str) -> Parsed:
    """One chunk that Telegram accepts as a message of ours."""
    parsed = _parse(document)
    assert set(parsed.tags) <= _OURS, parsed.tags
    assert 0 < _units(parsed.text) <= MESSAGE_LIMIT
    assert parsed.text.strip()
    return parsed


def _answer(content: str, citations: list[Citation] | None = None) -> list[Parsed]:
    return [_message(chunk) for chunk in render_answer(content, citations or [])]


# -- the validator itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "<b>x",
        "x</b>",
        "<b><i>x</b></i>",
        "<script>x</script>",
        "a < b",
        "a > b",
        "a & b",
        "&nbsp;",
        '<a href="javascript:alert(1)">x</a>',
        '<b class="x">y</b>',
        '<code class="language-py">x</code>',
        "<pre><b>x</b></pre>",
        '<a href="http://a.com"><a href="http://b.com">x</a></a>',
        "<blockquote><pre>x</pre></blockquote>",
        '<a href="http://a.com"><code>x</code></a>',
    ],
)
def test_the_checker_refuses_what_telegram_may_refuse(bad: str) -> None:
    with pytest.raises(BadHTML):
        _parse(bad)


def test_the_checker_reads_entities_as_telegram_does() -> None:
    parsed = _parse('<b>a &lt;&amp;&gt; &quot;</b> <a href="https://x.io/?a=1&amp;b=2">l</a>')
    assert parsed.text == 'a <&> " l'
    assert parsed.hrefs == ["https://x.io/?a=1&b=2"]


# -- escaping and constructs ----------------------------------------------------------------


def test_escape() -> None:
    assert escape('<b a="1">&amp;</b>') == "&lt;b a=&quot;1&quot;&gt;&amp;amp;&lt;/b&gt;"
    assert escape("plain 😀 text") == "plain 😀 text"


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("~~gone~~", "<s>gone</s>"),
        ("`a < b`", "<code>a &lt; b</code>"),
        ("***both***", "<i><b>both</b></i>"),
        (
            "[site](https://example.com/a?b=1&c=2)",
            '<a href="https://example.com/a?b=1&amp;c=2">site</a>',
        ),
        ("<https://example.com>", '<a href="https://example.com">https://example.com</a>'),
        ("[rel](docs/a.md)", "rel (docs/a.md)"),
        ("[mail](mailto:a@b.c)", "mail (mailto:a@b.c)"),
        ("[café](docs/café.md)", "café (docs/café.md)"),
        ("[](https://a.io/é)", '<a href="https://a.io/%C3%A9">https://a.io/é</a>'),
        ("[](docs/a.md)", "docs/a.md"),
        ("![cat](https://img.io/c.png)", '<a href="https://img.io/c.png">cat</a>'),
        ("# Title\n\ntext", "<b>Title</b>\n\ntext"),
        ("### **Deep** title", "<b>Deep title</b>"),
        ("line one\nline two", "line one\nline two"),
        ("para one\n\npara two", "para one\n\npara two"),
        ("- a\n- b\n* c", "• a\n• b\n\n• c"),
        ("1. one\n2. two", "1. one\n2. two"),
        ("3) three\n4) four", "3) three\n4) four"),
        ("- a\n  - b\n    1. c", "• a\n   • b\n      1. c"),
        ("Intro:\n\n- a\n- b\n\nAfter", "Intro:\n\n• a\n• b\n\nAfter"),
        ("> quoted **bold**\n> more", "<blockquote>quoted <b>bold</b>\nmore</blockquote>"),
        ("> a\n>\n> > b", "<blockquote>a\n\nb</blockquote>"),
        ("a\n\n---\n\nb", "a\n\n———\n\nb"),
        (
            "```python\nx = 1 < 2\n```",
            '<pre><code class="language-python">x = 1 &lt; 2</code></pre>',
        ),
        ("```\nplain\n```", "<pre>plain</pre>"),
        ("    indented code", "<pre>indented code</pre>"),
        ('```py" onload="x\ncode\n```', "<pre>code</pre>"),
        ("[`code` link](https://a.io)", '<a href="https://a.io">code link</a>'),
    ],
)
def test_constructs(markdown: str, expected: str) -> None:
    assert to_html(markdown) == expected
    _parse(expected)


def test_a_code_block_inside_a_quote_is_written_after_it() -> None:
    out = to_html("> said\n> ```\n> code\n> ```\n> more")
    assert (
        out == "<blockquote>said</blockquote>\n\n<pre>code</pre>\n\n<blockquote>more</blockquote>"
    )


def test_a_code_block_in_a_list_item_keeps_its_marker() -> None:
    out = to_html("1. run:\n\n   ```sh\n   ls -l\n   ```\n2. done")
    _parse(out)
    assert out.startswith("1. run:\n")
    assert '<pre><code class="language-sh">ls -l</code></pre>' in out
    assert out.endswith("2. done")


# -- citations and sources ------------------------------------------------------------------


def _cite(number: int, url: str, title: str = "", site: str = "") -> Citation:
    return Citation(number=number, url=url, title=title, site=site)


def test_markers_link_to_their_sources_and_the_sources_follow() -> None:
    citations = [
        _cite(1, "https://weather.gc.ca/nanaimo", "Nanaimo forecast", "Environment Canada"),
        _cite(2, "http://example.org/b", "Second"),
    ]
    [chunk] = render_answer("Rain today [1], wind later [2][1]. See [3].", citations)
    assert chunk == (
        'Rain today <a href="https://weather.gc.ca/nanaimo">[1]</a>, wind later '
        '<a href="http://example.org/b">[2]</a><a href="https://weather.gc.ca/nanaimo">[1]</a>.'
        " See [3].\n\n<b>Sources</b>\n"
        '1. <a href="https://weather.gc.ca/nanaimo">Nanaimo forecast</a> (Environment Canada)\n'
        '2. <a href="http://example.org/b">Second</a>'
    )


def test_sources_without_a_web_address_are_not_links() -> None:
    citations = [
        _cite(1, "javascript:alert(1)", "Evil"),
        _cite(2, "", "", "Some Site"),
        _cite(3, "ftp://files.example/x"),
        _cite(4, ""),
    ]
    [parsed] = _answer("A [1] B [2] C [3]", citations)
    assert parsed.hrefs == []
    assert parsed.text == (
        "A [1] B [2] C [3]\n\nSources\n1. Evil\n2. Some Site\n3. ftp://files.example/x\n4. Source 4"
    )


def test_markers_in_code_and_links_stay_as_they_are() -> None:
    citations = [_cite(1, "https://a.io/")]
    [chunk, *_] = render_answer("`x[1]` and [see [1]](https://b.io/)", citations)
    assert chunk.startswith('<code>x[1]</code> and <a href="https://b.io/">see [1]</a>')


def test_no_citations_no_sources_and_an_empty_answer_has_no_chunk() -> None:
    assert render_answer("Just text.", []) == ["Just text."]
    assert render_answer("", []) == []
    assert render_answer("   \n\n  ", []) == []
    assert render_answer("", [_cite(1, "https://a.io", "A")]) == [
        '<b>Sources</b>\n1. <a href="https://a.io">A</a>'
    ]


# -- markup injection -----------------------------------------------------------------------

_HOSTILE = [
    "<b>not bold</b>",
    "</pre></code></blockquote></a></b>",
    '<a href="javascript:alert(1)">click</a>',
    '<a href="https://x.io" onclick="steal()">x</a>',
    "&lt;b&gt; &amp; &#60; &nbsp; &",
    "<script>alert(1)</script>",
    "\"quoted\" 'single' `tick`",
    "<span class=tg-spoiler>x</span> <tg-spoiler>y</tg-spoiler>",
]


@pytest.mark.parametrize("hostile", _HOSTILE)
def test_raw_markup_in_an_answer_is_shown_not_obeyed(hostile: str) -> None:
    [parsed] = _answer(f"Text {hostile} end.")
    # Backticks make inline code; everything else comes out exactly as written.
    assert parsed.tags == (["code"] if "`" in hostile else [])
    assert parsed.text == f"Text {hostile.replace('`', '')} end."


@pytest.mark.parametrize("hostile", _HOSTILE)
def test_raw_markup_in_a_source_title_is_shown_not_obeyed(hostile: str) -> None:
    [parsed] = _answer("A [1].", [_cite(1, "https://a.io/", hostile, hostile)])
    assert parsed.hrefs == ["https://a.io/", "https://a.io/"]
    assert parsed.text == f"A [1].\n\nSources\n1. {hostile.strip()}"


@pytest.mark.parametrize(
    "url",
    [
        'https://a.io/"><b>x</b>',
        "https://a.io/' onmouseover='x",
        "https://a.io/<script>",
        "https://a.io/a b",
        'javascript://a.io/%0aalert("x")',
        "data:text/html,<b>x</b>",
        "  HTTPS://A.IO/Path?q=&lt;  ",
    ],
)
def test_a_hostile_source_address_cannot_break_out_of_its_attribute(url: str) -> None:
    for parsed in _answer("A [1]", [_cite(1, url, "T")]):
        for href in parsed.hrefs:
            assert urlsplit(href).hostname == "a.io"
            assert not set(href) & set('<>" ')


@pytest.mark.parametrize(
    "markdown",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](vbscript:msgbox)",
        "[x](data:text/html;base64,PGI+)",
        "<javascript:alert(1)>",
        '[x](<https://a.io/" onclick="y>)',
        '[x](https://a.io/"><b>)',
    ],
)
def test_hostile_links_in_an_answer(markdown: str) -> None:
    [parsed] = _answer(markdown)
    for href in parsed.hrefs:
        assert urlsplit(href).scheme == "https"
        assert not set(href) & set("<>\"' ")


@pytest.mark.parametrize(
    ("markdown", "visible"),
    [
        ("**bold", "**bold"),
        ("*a **b* c**", None),
        ("__x", "__x"),
        ("`open code", "`open code"),
        ("~~strike", "~~strike"),
        ("[text](https://a.io", "[text](https://a.io"),
    ],
)
def test_unbalanced_markdown_stays_literal(markdown: str, visible: str | None) -> None:
    [parsed] = _answer(markdown)
    if visible is not None:
        assert parsed.text == visible
        assert parsed.tags == []


def test_a_lone_fence_makes_the_rest_code_and_closes_it() -> None:
    [chunk] = render_answer("Before\n\n```\n</pre><b>x</b>\nrest", [])
    assert chunk == "Before\n\n<pre>&lt;/pre&gt;&lt;b&gt;x&lt;/b&gt;\nrest</pre>"
    _message(chunk)


# -- splitting ------------------------------------------------------------------------------


def _paragraphs(count: int, size: int) -> list[str]:
    return [f"P{i} " + ("word " * (size // 5))[: size - 4].strip() for i in range(count)]


def test_a_long_answer_is_split_between_paragraphs() -> None:
    paragraphs = _paragraphs(30, 500)
    chunks = _answer("\n\n".join(paragraphs))
    assert len(chunks) > 1
    seen: list[str] = []
    for parsed in chunks:
        # Each chunk is a run of whole paragraphs.
        parts = parsed.text.split("\n\n")
        assert all(part in paragraphs for part in parts)
        seen += parts
    assert seen == paragraphs


def test_chunks_are_filled_as_far_as_the_limit_allows() -> None:
    chunks = _answer("\n\n".join(_paragraphs(30, 500)))
    for parsed in chunks[:-1]:
        assert _units(parsed.text) + 2 + 500 > MESSAGE_LIMIT


def test_the_limit_counts_utf16_units_not_code_points() -> None:
    # 1,500 emoji are 3,000 units each paragraph: two paragraphs never share a message.
    emoji = "😀" * 1500
    chunks = _answer(f"{emoji}\n\n{emoji}")
    assert [p.text for p in chunks] == [emoji, emoji]
    # One paragraph of 3,000 emoji (6,000 units) is cut between two emoji.
    chunks = _answer("😀" * 3000)
    assert [len(p.text) for p in chunks] == [2048, 952]


def test_an_over_long_code_block_is_split_at_lines_and_reopened() -> None:
    lines = [f"line_{i:04d} = compute({i}) < limit & more" for i in range(300)]
    chunks = render_answer("Intro\n\n```python\n" + "\n".join(lines) + "\n```\n\nOutro", [])
    assert len(chunks) >= 3
    code_lines: list[str] = []
    for chunk in chunks:
        parsed = _message(chunk)
        for piece in parsed.text.split("\n\n"):
            if piece.startswith("line_"):
                code_lines += piece.split("\n")
        if "line_" in parsed.text:
            assert '<pre><code class="language-python">line_' in chunk
    assert code_lines == lines


def test_an_over_long_line_is_split_between_words_keeping_its_tags() -> None:
    words = [f"w{i:05d}" for i in range(1500)]
    chunks = render_answer("**" + " ".join(words) + "**", [])
    assert len(chunks) == 3
    seen: list[str] = []
    for chunk in chunks:
        assert chunk.startswith("<b>")
        assert chunk.endswith("</b>")
        seen += _message(chunk).text.split(" ")
    assert seen == words


def test_a_word_longer_than_a_message_is_cut_anywhere() -> None:
    word = "x" * 10_000
    chunks = _answer(f"[{word}](https://a.io/)")
    assert [len(p.text) for p in chunks] == [4096, 4096, 1808]
    assert all(p.hrefs == ["https://a.io/"] for p in chunks)


def test_a_split_quote_keeps_quoting() -> None:
    quote = "\n>\n".join(f"> {p}" for p in _paragraphs(20, 400))
    chunks = render_answer(quote, [])
    assert len(chunks) > 1
    for chunk in chunks:
        _message(chunk)
        assert chunk.startswith("<blockquote>")
        assert chunk.endswith("</blockquote>")


def test_the_sources_are_split_too() -> None:
    citations = [_cite(i, f"https://s{i}.io/", "T" * 80) for i in range(1, 120)]
    chunks = _answer("See [1].", citations)
    assert len(chunks) >= 3
    assert sum(len(p.hrefs) for p in chunks) == 120


# -- drafts ---------------------------------------------------------------------------------


def test_a_draft_is_plain_escaped_text() -> None:
    assert render_draft("**a** <b>&") == "**a** &lt;b&gt;&amp;"


def test_a_long_draft_keeps_its_end() -> None:
    text = "".join(f"{i} " for i in range(3000))
    draft = render_draft(text)
    parsed = _parse(draft)
    assert parsed.tags == []
    assert _units(parsed.text) == MESSAGE_LIMIT
    assert parsed.text.startswith("…")
    assert text.endswith(parsed.text[1:])


def test_a_long_draft_is_cut_between_emoji() -> None:
    draft = render_draft("<" + "😀" * 3000)
    assert _units(html.unescape(draft)) == MESSAGE_LIMIT - 1
    assert draft == "…" + "😀" * 2047
    assert render_draft("&" * MESSAGE_LIMIT) == "&amp;" * MESSAGE_LIMIT


# -- properties -----------------------------------------------------------------------------

_MARKDOWNISH = st.sampled_from(
    [
        *"*_`~[]()<>&\"'#>-+.!|\\\n ",
        "\n\n",
        "```",
        "```py\n",
        "**",
        "[1]",
        "[2]",
        "](https://a.io/x)",
        "](javascript:x)",
        "<b>",
        "</pre>",
        "&amp;",
        "&#60;",
        "- ",
        "1. ",
        "> ",
        "    ",
        "😀",
        "é",
        "中",
    ]
)
_TEXT = st.lists(st.one_of(_MARKDOWNISH, st.text(max_size=6)), max_size=60).map("".join)
_URLS = st.sampled_from(
    ["https://a.io/", "http://b.io/p?q=1&r=2", "javascript:alert(1)", "", 'https://c.io/"><b>']
)
_CITATIONS = st.lists(
    st.builds(Citation, number=st.integers(1, 4), title=_TEXT, url=_URLS, site=st.text(max_size=8)),
    max_size=4,
)


# A fence's info string is the code block's language: an attribute, not text.
# (after any quote or list markers that hold the fence; a line ends at "\n", "\r\n" or a
# lone "\r", as in CommonMark)
_FENCE_INFO = re.compile(r"^((?:\s*(?:[>*+-]|\d+[.)]))*\s*(?:`{3,}|~{3,}))[^\n]*", re.MULTILINE)
_LINE_END = re.compile(r"\r\n?")


def _letters(text: str) -> Counter[str]:
    return Counter(c for c in text if c.isalpha())


def _check_answer(content: str, citations: list[Citation], limit: int) -> None:
    chunks = render_answer(content, citations)
    seen = ""
    for chunk in chunks:
        parsed = _parse(chunk)
        assert set(parsed.tags) <= _OURS
        assert _units(parsed.text) <= limit
        seen += parsed.text + " ".join(unquote(h) for h in parsed.hrefs)
    wanted = _letters(_FENCE_INFO.sub(r"\1", _LINE_END.sub("\n", content)))
    assert not wanted - _letters(seen), (wanted - _letters(seen), chunks)
    # A site named like its title is shown once.
    for citation in citations:
        assert set(_letters(citation.title + citation.site)) <= set(_letters(seen))


_PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(content=_TEXT, citations=_CITATIONS)
def test_any_answer_becomes_valid_messages_that_lose_nothing(
    content: str, citations: list[Citation]
) -> None:
    _check_answer(content, citations, MESSAGE_LIMIT)


@_PROPERTY
@given(content=_TEXT, citations=_CITATIONS, limit=st.integers(8, 60))
@example(content="0\r```](https://a.io/x)", citations=[], limit=8)  # a fence after a lone CR
def test_any_answer_splits_into_valid_messages_that_lose_nothing(
    content: str, citations: list[Citation], limit: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formatting, "MESSAGE_LIMIT", limit)
        _check_answer(content, citations, limit)


@_PROPERTY
@given(text=st.text(max_size=50), limit=st.integers(2, 30))
def test_any_draft_is_plain_and_within_the_limit(text: str, limit: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formatting, "MESSAGE_LIMIT", limit)
        draft = render_draft(text)
    parsed = _parse(draft)
    assert parsed.tags == []
    assert _units(parsed.text) <= limit
    assert parsed.text == text or (parsed.text[0] == "…" and text.endswith(parsed.text[1:]))
