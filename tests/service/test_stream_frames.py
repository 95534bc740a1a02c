"""What a streamed answer carries: keep-alives while nothing else is sent, errors after the grace
window, and the "Sources" footer of /v1/chat/completions (never on /v1/conversations)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

import httpx
import openai
import pytest
from service_fakes import FOOTER, WEATHER, FakePersona, chunks, make_reply

from generic_framework.core.events import PersonaEvent, RoundStarted, TextDelta, ToolFinished
from generic_framework.core.reply import Citation
from generic_framework.service.sources import safe_link, safe_title, sources_footer
from generic_framework.wire.errors import RateLimitError

Client = Callable[..., httpx.AsyncClient]


class PacedPersona(FakePersona):
    """Sleeps ``pause`` seconds before each of its events (a slow tool, a long search)."""

    def __init__(self, events: Sequence[PersonaEvent], pause: float, **kwargs: Any) -> None:
        super().__init__(events=events, **kwargs)
        self.pause = pause

    async def stream(
        self,
        text: str,
        *,
        conversation_id: str | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
        options: Any = None,
        caller: Any = None,
    ) -> AsyncGenerator[PersonaEvent, None]:
        turn = super().stream(
            text, conversation_id=conversation_id, history=history, options=options, caller=caller
        )
        async for event in turn:
            await asyncio.sleep(self.pause)
            yield event


def ask(stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "scout", "messages": [{"role": "user", "content": "q"}], "stream": stream,
            **extra}  # fmt: skip


def content(frames: list[Any]) -> str:
    return "".join(
        f["choices"][0]["delta"].get("content", "")
        for f in frames
        if isinstance(f, dict) and f.get("choices")
    )


# ------------------------------------------------------------------ keep-alives and the grace


async def test_keep_alives_fill_the_silence_of_a_slow_tool(client_for: Client) -> None:
    events = [RoundStarted(1, ["slow"]), ToolFinished("slow", True, 400.0), TextDelta("Done.")]
    persona = PacedPersona(events, pause=0.45)
    async with client_for({"scout": persona}, bot_stream_keepalive=0.1) as client:
        response = await client.post("/v1/chat/completions", json=ask())
    assert response.status_code == 200
    body = response.text
    between = body[body.index('"round_started"') : body.index('"tool_finished"')]
    assert between.count(": keep-alive\n\n") >= 3
    assert chunks(body)[-1] == "[DONE]"  # comments are no frames: the payloads are unchanged


async def test_no_keep_alive_when_events_come_often(client_for: Client) -> None:
    async with client_for({"scout": PacedPersona([TextDelta("a")] * 3, pause=0.01)}) as client:
        response = await client.post("/v1/chat/completions", json=ask())
    assert ": keep-alive" not in response.text


async def test_a_failure_after_the_grace_window_is_an_error_frame(client_for: Client) -> None:
    persona = PacedPersona([], pause=0.0, error=RateLimitError("busy", code="1302"))
    slow = PacedPersona(
        [TextDelta("x")], pause=0.3, error=RateLimitError("busy", code="1302"), error_after=1
    )
    # Within the window the refusal keeps its status; after it the headers went out already.
    async with client_for({"scout": persona}, bot_stream_grace=0.2) as client:
        early = await client.post("/v1/chat/completions", json=ask())
    async with client_for({"scout": slow}, bot_stream_grace=0.05) as client:
        late = await client.post("/v1/chat/completions", json=ask())
    assert early.status_code == 429
    assert late.status_code == 200
    frames = chunks(late.text)
    assert frames[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert frames[1]["choices"][0]["delta"]["content"] == "x"
    assert frames[-1]["error"]["code"] == "1302"
    assert "[DONE]" not in frames


# ------------------------------------------------------------------ the sources footer


@pytest.mark.parametrize(
    ("setting", "field", "footer"),
    [(True, None, True), (True, False, False), (False, None, False), (False, True, True)],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_footer_follows_the_setting_and_the_request(
    client_for: Client, setting: bool, field: bool | None, footer: bool, stream: bool
) -> None:
    extra = {} if field is None else {"sources_footer": field}
    async with client_for(bot_sources_footer=setting) as client:
        response = await client.post("/v1/chat/completions", json=ask(stream, **extra))
    assert response.status_code == 200
    if stream:
        frames = chunks(response.text)
        text = content(frames)
        assert frames[-2]["reply"]["content"] == "Light rain and 9 degrees [1]."
    else:
        text = response.json()["choices"][0]["message"]["content"]
    assert text == "Light rain and 9 degrees [1]." + (FOOTER if footer else "")


async def test_no_footer_without_sources(client_for: Client) -> None:
    persona = FakePersona(events=[TextDelta("Hello.")], reply=make_reply("Hello.", citations=()))
    async with client_for({"scout": persona}) as client:
        plain = await client.post("/v1/chat/completions", json=ask(False))
        streamed = await client.post("/v1/chat/completions", json=ask())
    assert plain.json()["choices"][0]["message"]["content"] == "Hello."
    assert content(chunks(streamed.text)) == "Hello."


@pytest.mark.parametrize("stream", [False, True])
async def test_the_conversations_api_has_no_footer(client_for: Client, stream: bool) -> None:
    async with client_for() as client:
        response = await client.post(
            "/v1/conversations/c-1/messages",
            json={"persona": "scout", "content": "q", "stream": stream},
        )
    assert response.status_code == 200
    text = content(chunks(response.text)) if stream else response.json()["content"]
    assert text == "Light rain and 9 degrees [1]."


async def test_a_bad_footer_field_is_a_400(client_for: Client) -> None:
    async with client_for() as client:
        response = await client.post("/v1/chat/completions", json=ask(sources_footer="no"))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "sources_footer"


def cite(number: int, title: str, url: str, site: str = "") -> Citation:
    return Citation(number=number, title=title, url=url, site=site)


def test_footer_lines_are_numbered_links() -> None:
    footer = sources_footer([WEATHER, cite(2, "Tides", "http://tides.example/n?a=1&b=2")])
    assert footer == (
        "\n\nSources:\n1. [Nanaimo weather](https://weather.example.org/nanaimo)\n"
        "2. [Tides](http://tides.example/n?a=1&b=2)"
    )
    assert sources_footer([]) == ""


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", " JavaScript:alert(1)", "java\tscript:alert(1)", "data:text/html,x",
     "vbscript:x", "/relative/path", "//host.example/x", "ftp://host.example/f", "https://",
     "http://[::1", ""],
)  # fmt: skip
def test_only_absolute_http_links_are_kept(url: str) -> None:
    assert safe_link(url) is None
    assert sources_footer([cite(1, "Title", url)]) == "\n\nSources:\n1. Title"


def test_link_characters_that_would_end_the_link_are_encoded() -> None:
    link = safe_link("https://ex.org/a b(c)<d>\"e'`\\")
    assert link == "https://ex.org/a%20b%28c%29%3Cd%3E%22e%27%60%5C"
    assert safe_link("HTTPS://Ex.org/x") == "https://Ex.org/x"


def test_titles_cannot_break_out_of_the_link() -> None:
    title = "Evil](javascript:alert(1)) *bold* <b>x</b> `code` ![img](x)\n# heading\r\nnext"
    footer = sources_footer([cite(1, title, "https://ex.org")])
    line = footer.split("\n")[-1]
    assert line == (
        r"1. [Evil\](javascript:alert(1)) \*bold\* \<b\>x\</b\> \`code\` \!\[img\](x) \# "
        r"heading next](https://ex.org)"
    )
    assert footer.count("\n") == 3  # the title stayed on its line
    assert safe_title("x" * 500).endswith("\u2026") and len(safe_title("x" * 500)) == 300


def test_an_empty_title_falls_back_to_the_site_then_the_host() -> None:
    footer = sources_footer(
        [cite(1, "", "https://a.example/x", site="Site A"), cite(2, " ", "https://b.example/"),
         cite(3, "", "javascript:x")]
    )  # fmt: skip
    assert footer.split("\n")[3:] == [
        "1. [Site A](https://a.example/x)",
        "2. [b.example](https://b.example/)",
        "3. source 3",
    ]


async def test_the_official_client_reads_through_keep_alives(client_for: Client) -> None:
    events = [TextDelta("Light rain "), ToolFinished("slow", True, 1.0), TextDelta("and 9 [1].")]
    persona = PacedPersona(events, pause=0.25)
    async with client_for({"scout": persona}, bot_stream_keepalive=0.05) as http:
        client = openai.AsyncOpenAI(
            api_key="unused", base_url="http://localhost/v1", http_client=http, max_retries=0
        )
        stream = await client.chat.completions.create(
            model="scout", messages=[{"role": "user", "content": "q"}], stream=True
        )
        pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
    assert "".join(pieces) == "Light rain and 9 [1]." + FOOTER
