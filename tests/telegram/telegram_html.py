"""Telegram's HTML parse mode, as the Bot API server applies it, for the fake Bot API.

A message the bot sends with ``parse_mode=HTML`` is parsed the way Telegram's own server (TDLib's
``parse_html``) parses it: only the supported tags, tags closed in order, the four named entities
``&lt; &gt; &amp; &quot;`` and numeric references (an unknown ``&name;`` stays literal text, as
there). What fails there fails here, with the same wording, so a test learns that a real chat
would have refused the message. What parses yields what the user sees: the visible text, its
entities (offsets in UTF-16 code units, as the Bot API counts) and the links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["HtmlError", "Parsed", "parse_html", "utf16_len"]

_SIMPLE = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}
_TAGS = {*_SIMPLE, "a", "code", "pre", "blockquote", "tg-emoji"}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


class HtmlError(ValueError):
    """The text is not valid Telegram HTML; the message is Telegram's own wording."""


@dataclass
class Parsed:
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


@dataclass
class _Open:
    tag: str
    argument: str
    offset: int  # UTF-16 offset of the first character inside the tag
    expandable: bool = False


def utf16_len(text: str) -> int:
    """The length the Bot API measures: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, pos: int) -> int:
    return len(text[:pos].encode())


def _entity(text: str, pos: int) -> tuple[str, int] | None:
    """The character of the reference at ``text[pos] == '&'`` and the position after it."""
    end = pos + 1
    if text[end : end + 1] == "#":
        end += 1
        hexa = text[end : end + 1] in ("x", "X")
        end += hexa
        start = end
        digits = "0123456789abcdefABCDEF" if hexa else "0123456789"
        while end < len(text) and text[end] in digits:
            end += 1
        if end == start or end - start > 7:
            return None
        code = int(text[start:end], 16 if hexa else 10)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return None
        char = chr(code)
    else:
        while end < len(text) and text[end].isascii() and text[end].isalpha():
            end += 1
        name = text[pos + 1 : end]
        if name not in _NAMED:
            return None
        char = _NAMED[name]
    return char, end + 1 if text[end : end + 1] == ";" else end


class _Parser:
    def __init__(self, text: str) -> None:
        self.src = text
        self.i = 0
        self.out: list[str] = []
        self.offset = 0  # UTF-16 length of self.out
        self.stack: list[_Open] = []
        self.entities: list[dict[str, Any]] = []
        self.links: list[str] = []

    def error(self, message: str) -> HtmlError:
        return HtmlError(message)

    def put(self, chars: str) -> None:
        self.out.append(chars)
        self.offset += utf16_len(chars)

    def run(self) -> Parsed:
        src = self.src
        while self.i < len(src):
            char = src[self.i]
            if char == "&":
                decoded = _entity(src, self.i)
                if decoded is not None:
                    self.put(decoded[0])
                    self.i = decoded[1]
                    continue
            if char != "<":
                self.put(char)
                self.i += 1
                continue
            if src[self.i + 1 : self.i + 2] == "/":
                self.end_tag()
            else:
                self.start_tag()
        if self.stack:
            tag = self.stack[-1].tag
            raise self.error(f'Can\'t find end tag corresponding to start tag "{tag}"')
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return Parsed("".join(self.out), self.entities, self.links)

    def skip_spaces(self) -> None:
        while self.i < len(self.src) and self.src[self.i].isspace():
            self.i += 1

    def word(self, stops: str) -> str:
        start = self.i
        while self.i < len(self.src) and not self.src[self.i].isspace():
            if self.src[self.i] in stops:
                break
            self.i += 1
        return self.src[start : self.i]

    def start_tag(self) -> None:
        begin = self.i
        at = _byte_offset(self.src, begin)
        self.i += 1
        tag = self.word(">").lower()
        if self.i >= len(self.src):
            raise self.error(f"Unclosed start tag at byte offset {at}")
        if tag not in _TAGS:
            raise self.error(f'Unsupported start tag "{tag}" at byte offset {at}')
        opened = _Open(tag, "", self.offset)
        while True:
            self.skip_spaces()
            if self.i >= len(self.src):
                raise self.error(f"Unclosed start tag at byte offset {at}")
            if self.src[self.i] == ">":
                break
            self.attribute(opened, at)
        self.i += 1
        if tag == "span" and opened.argument != "spoiler":
            raise self.error(f'Tag "span" must have class "tg-spoiler" at byte offset {at}')
        self.stack.append(opened)

    def attribute(self, opened: _Open, at: int) -> None:
        name = self.word("=>").lower()
        if not name:
            raise self.error(f'Empty attribute name in the tag "{opened.tag}" at byte offset {at}')
        self.skip_spaces()
        if self.src[self.i : self.i + 1] != "=":
            if opened.tag == "blockquote" and name == "expandable":
                opened.expandable = True
                return
            raise self.error(
                f'Expected equal sign in declaration of an attribute of the tag "{opened.tag}" '
                f"at byte offset {at}"
            )
        self.i += 1
        self.skip_spaces()
        if self.i >= len(self.src):
            raise self.error(f"Unclosed start tag at byte offset {at}")
        value = self.attribute_value()
        if self.i >= len(self.src):
            raise self.error(f"Unclosed start tag at byte offset {at}")
        if opened.tag == "a" and name == "href":
            opened.argument = value
        elif opened.tag == "code" and name == "class" and value.startswith("language-"):
            opened.argument = value.removeprefix("language-")
        elif opened.tag == "span" and name == "class" and value.startswith("tg-"):
            opened.argument = value.removeprefix("tg-")
        elif opened.tag == "tg-emoji" and name == "emoji-id":
            opened.argument = value

    def attribute_value(self) -> str:
        src = self.src
        quote = src[self.i]
        if quote not in "'\"":
            start = self.i
            while self.i < len(src) and (src[self.i].isalnum() or src[self.i] in ".-"):
                self.i += 1
            if self.i < len(src) and not src[self.i].isspace() and src[self.i] != ">":
                raise self.error(
                    f"Unexpected end of name token at byte offset {_byte_offset(src, self.i)}"
                )
            return src[start : self.i].lower()
        self.i += 1
        value: list[str] = []
        while self.i < len(src) and src[self.i] != quote:
            decoded = _entity(src, self.i) if src[self.i] == "&" else None
            if decoded is None:
                value.append(src[self.i])
                self.i += 1
            else:
                value.append(decoded[0])
                self.i = decoded[1]
        self.i += self.i < len(src)
        return "".join(value)

    def end_tag(self) -> None:
        begin = self.i
        at = _byte_offset(self.src, begin)
        if not self.stack:
            raise self.error(f"Unexpected end tag at byte offset {at}")
        self.i += 2
        name = self.word(">").lower()
        self.skip_spaces()
        if self.src[self.i : self.i + 1] != ">":
            raise self.error(f"Unclosed end tag at byte offset {at}")
        self.i += 1
        opened = self.stack.pop()
        if name and name != opened.tag:
            raise self.error(
                f'Unmatched end tag at byte offset {at}, expected "</{opened.tag}>", '
                f'found "</{name}>"'
            )
        self.close(opened)

    def close(self, opened: _Open) -> None:
        length = self.offset - opened.offset
        if length <= 0:
            return
        entity: dict[str, Any] = {"offset": opened.offset, "length": length}
        tag = opened.tag
        if tag in _SIMPLE:
            entity["type"] = _SIMPLE[tag]
        elif tag == "a":
            if not opened.argument:
                return
            entity.update(type="text_link", url=opened.argument)
            self.links.append(opened.argument)
        elif tag == "tg-emoji":
            if not opened.argument.isdigit():
                raise self.error("Invalid custom emoji identifier specified")
            entity.update(type="custom_emoji", custom_emoji_id=opened.argument)
        elif tag == "blockquote":
            entity["type"] = "expandable_blockquote" if opened.expandable else "blockquote"
        elif tag == "pre":
            entity["type"] = "pre"
            self.merge_code_into_pre(entity)
        else:
            entity["type"] = "code"
            if opened.argument:
                entity["language"] = opened.argument
        self.entities.append(entity)

    def merge_code_into_pre(self, pre: dict[str, Any]) -> None:
        """``<pre><code class="language-x">`` is one pre entity with a language."""
        for entity in self.entities:
            same = entity["offset"] == pre["offset"] and entity["length"] == pre["length"]
            if same and entity["type"] == "code":
                self.entities.remove(entity)
                if "language" in entity:
                    pre["language"] = entity["language"]
                return


def parse_html(text: str) -> Parsed:
    """Parse ``text`` as Telegram does for ``parse_mode=HTML``; raise :class:`HtmlError`."""
    return _Parser(text).run()
