"""The source of the bundled fixtures: ``python tests/mock/fixture_factory.py`` rewrites them.

The bundled fixtures are synthetic (there was no key to record real ones): the answers are
invented, the shapes follow docs/protocol.md §3-§4. Requests are built the way ``Persona`` builds
them (system prompt, user text with ``//`` stripped, the assistant echo without ``index``,
one tool message per call), and every tool message holds what the real example tool returns,
so ``generic-framework replay`` can check them against the real persona.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fixture_parts import (
    CHAT,
    CLIENT_SEARCH_TOOL,
    CODING_CHAT,
    FUNCTION_TOOLS,
    JSON_HEADERS,
    KEEPER_SYSTEM,
    MEMORY_TOOLS,
    READER_TOOL,
    Conversation,
    call,
    completion,
    fixture,
    source,
)

from generic_framework.core.options import JsonSchemaFormat, schema_instruction
from generic_framework.core.persona import CONTENT_FILTER_NOTICE
from generic_framework.mock.fixture import ClientTurn, Fixture, bundled_fixtures_dir
from generic_framework.pictures import data_url, read_pictures, user_content
from generic_framework.pictures.vision import description_request

# ------------------------------------------------------------------------------ scenarios


def plain_answer() -> Fixture:
    text = "What is the capital of Canada?"
    talk = Conversation(text)
    answer = "The capital of Canada is Ottawa, in the province of Ontario."
    talk.exchange(
        completion("plain", answer, reasoning="A simple fact: Ottawa.", usage=(40, 25, 8))
    )
    return fixture(
        "plain_answer",
        "A message without // : one call, no tools offered, a plain answer.",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )


def web_search_hello() -> Fixture:
    text = "// hello"
    talk = Conversation(text)
    answer = "Hello! Ask me anything; start a message with // when you want me to search the web."
    talk.exchange(completion("hello", answer, reasoning="A greeting; no search needed."))
    return fixture(
        "web_search_hello",
        "// hello: web_search and the functions are offered, and the model answers without "
        "searching (calling a tool is the model's choice).",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )


NANAIMO_SOURCES = [
    source(
        1,
        "Nanaimo, BC - current conditions and forecast",
        "https://weather.example.ca/city/nanaimo",
        "Example Weather Service",
        "Nanaimo: 9 °C, cloudy, humidity 87 %. Light rain developing this afternoon.",
        "2026-01-09",
    ),
    source(
        2,
        "Nanaimo hourly forecast",
        "https://www.forecast.example.com/ca/bc/nanaimo/hourly",
        "Forecast Example",
        "Wind SE 10 km/h. Rain amount 2-4 mm. Low tonight 5 °C.",
        "2026-01-09",
    ),
    source(
        3,
        "Vancouver Island weather outlook",
        "https://news.example.org/vancouver-island-weather",
        "Island News Example",
        "Showers easing after midnight; a drier, brighter day expected tomorrow.",
        "",
    ),
]
NANAIMO_ANSWER = (
    "Right now Nanaimo is mild and cloudy at about 9 °C, with light rain developing this "
    "afternoon [ref_1]. The wind is light from the southeast at around 10 km/h, and tonight "
    "drops to about 5 °C [ref_2]; the showers should ease after midnight, with a brighter day "
    "tomorrow [ref_3]."
)
NANAIMO_REPLY = (
    NANAIMO_ANSWER.replace("[ref_1]", "[1]").replace("[ref_2]", "[2]").replace("[ref_3]", "[3]")
)
NANAIMO_URLS = [item["link"] for item in NANAIMO_SOURCES]


def _nanaimo_turn(
    name: str, description: str, text: str, answer: dict[str, Any], *, stream: bool = False
) -> Fixture:
    """A Nanaimo weather question answered in one call with the built-in search's sources."""
    talk = Conversation(text, stream=stream)
    talk.exchange(answer)
    return fixture(
        name,
        description,
        text,
        talk,
        content=NANAIMO_REPLY,
        stop_reason="completed",
        rounds=1,
        citations=NANAIMO_URLS,
    )


def _nanaimo(stream: bool) -> Fixture:
    answer = completion(
        "nanaimo",
        NANAIMO_ANSWER,
        reasoning="The search results give current conditions and tonight's forecast.",
        usage=(1450, 96, 14),
        web_search=NANAIMO_SOURCES,
    )
    mode = "streamed (SSE; web_search[] on the last chunk)" if stream else "JSON"
    return _nanaimo_turn(
        "web_search_nanaimo_stream" if stream else "web_search_nanaimo",
        f"The main demo, {mode}: Z.AI runs the built-in web_search server-side in one call; "
        "no tool_calls, the answer cites [ref_N] and the sources come back as web_search[].",
        "// what's the weather in Nanaimo?",
        answer,
        stream=stream,
    )


def web_search_nanaimo() -> Fixture:
    return _nanaimo(stream=False)


def web_search_nanaimo_stream() -> Fixture:
    return _nanaimo(stream=True)


def web_search_tool_calls() -> Fixture:
    text = "// what's new in Python 3.13?"
    talk = Conversation(text)
    first = completion(
        "py313-1",
        "",
        reasoning="I should search for the release notes.",
        calls=[
            call(
                "py313",
                "web_search",
                {"search_query": "Python 3.13 new features"},
                0,
                kind="web_search",
            ),
        ],
        usage=(900, 30, 9),
    )
    talk.exchange(first, note="the gateway answers with a web_search tool call")
    talk.run_tools(first)
    sources = [
        source(
            1,
            "What's new in Python 3.13",
            "https://docs.example.org/python/3.13/whatsnew",
            "Python Docs Example",
            "A new interactive interpreter, an experimental free-threaded build and a JIT.",
            "2024-10-07",
        ),
        source(
            2,
            "Python 3.13 released",
            "https://blog.example.net/python-313-released",
            "Example Dev Blog",
            "Python 3.13 ships with colourised tracebacks and improved error messages.",
            "2024-10-08",
        ),
    ]
    final = (
        "Python 3.13 brings a new interactive interpreter, an experimental free-threaded build "
        "and an experimental JIT [ref_1], plus colourised tracebacks and clearer error "
        "messages [ref_2]."
    )
    talk.exchange(
        completion(
            "py313-2",
            final,
            reasoning="Summarise the two sources.",
            usage=(1700, 60, 6),
            web_search=sources,
        ),
        note="after the empty confirmation, the final answer with its sources",
    )
    return fixture(
        "web_search_tool_calls",
        "The gateway/legacy flow: GLM answers with a web_search tool call; the persona sends "
        'the empty confirmation (a tool message with content "") and gets the final answer.',
        text,
        talk,
        content=final.replace("[ref_1]", "[1]").replace("[ref_2]", "[2]"),
        stop_reason="completed",
        rounds=2,
        citations=[item["link"] for item in sources],
    )


def web_search_no_markers() -> Fixture:
    text = "// how tall is the Malahat SkyWalk?"
    talk = Conversation(text)
    sources = [
        source(
            1,
            "Malahat SkyWalk - visit",
            "https://travel.example.ca/malahat-skywalk",
            "Travel Example",
            "The spiral tower rises 32 metres above the forest floor.",
            "2025-06-02",
        ),
        source(
            2,
            "A walk above the trees",
            "https://news.example.org/skywalk-opens",
            "Island News Example",
            "The 600-metre treetop walk leads to a 32 m spiral tower with views of the inlet.",
            "",
        ),
    ]
    answer = (
        "The Malahat SkyWalk's spiral tower is about 32 metres tall, at the end of a "
        "600-metre walk through the treetops."
    )
    talk.exchange(
        completion(
            "skywalk",
            answer,
            reasoning="Both results give 32 m for the tower.",
            usage=(1300, 40, 9),
            web_search=sources,
        ),
        note="an answer written under Z.AI's own default search prompt: no [ref_N] markers",
    )
    return fixture(
        "web_search_no_markers",
        "A built-in search whose answer cites nothing (Z.AI's default search_prompt says to "
        "answer without citing sources): the reply still lists the sources of web_search[].",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[item["link"] for item in sources],
    )


def web_search_client_mode() -> Fixture:
    text = "// when is low tide in Nanaimo today?"
    talk = Conversation(text, web_tools=[*FUNCTION_TOOLS, CLIENT_SEARCH_TOOL])
    first = completion(
        "tide-1",
        "",
        reasoning="Search for today's tide table.",
        calls=[call("tide", "search_web", {"query": "Nanaimo tide table today"}, 0)],
        usage=(820, 25, 8),
    )
    talk.exchange(first, note="WEB_SEARCH_MODE=client: the model calls the search_web function")
    results = [
        source(
            1,
            "Nanaimo tide table",
            "https://tides.example.ca/nanaimo",
            "Example Tides",
            "Low tide 11:42 (0.9 m), high tide 18:05 (4.3 m).",
            "2026-01-09",
        )
    ]
    found = talk.search("Nanaimo tide table today", results)
    talk.run_tools(first, [found])
    final = "Low tide in Nanaimo today is at 11:42, at about 0.9 m [ref_1]."
    talk.exchange(completion("tide-2", final, reasoning="One clear source.", usage=(1100, 30, 5)))
    return fixture(
        "web_search_client_mode",
        "WEB_SEARCH_MODE=client (for endpoints that do not run the built-in tool): the model "
        "calls search_web, the persona calls the Web Search API and numbers the results.",
        text,
        talk,
        persona="scout-client",
        content=final.replace("[ref_1]", "[1]"),
        stop_reason="completed",
        rounds=2,
        citations=["https://tides.example.ca/nanaimo"],
    )


TRAM_RESULTS = [
    source(
        1,
        "Council approves tram line extension",
        "https://news.example.com/2026/01/tram-line-approved",
        "Example News",
        "The city council approved the 4.2 km tram line extension on Tuesday, 9 votes to 4.",
        "2026-01-13",
    ),
    source(
        2,
        "Tram extension: what happens next",
        "https://transit.example.org/tram-extension-timeline",
        "Transit Example",
        "Construction is planned to start in spring 2027, with service from late 2029.",
        "2026-01-14",
    ),
]


def web_search_mcp_mode() -> Fixture:
    text = "// did the council approve the tram line extension?"
    talk = Conversation(text, web_tools=[*FUNCTION_TOOLS, CLIENT_SEARCH_TOOL], path=CODING_CHAT)
    first = completion(
        "tram-1",
        "",
        reasoning="Search for the council's decision on the tram extension.",
        calls=[call("tram", "search_web", {"query": "tram line extension council decision"}, 0)],
        usage=(830, 26, 9),
    )
    talk.exchange(first, note="WEB_SEARCH_MODE=auto on the coding endpoint: mcp")
    arguments = {
        "search_query": "tram line extension council decision",
        "count": 5,
        "search_recency_filter": "noLimit",
        "content_size": "medium",
    }
    found = talk.mcp_search(arguments, TRAM_RESULTS)
    talk.run_tools(first, [found])
    final = (
        "Yes. The city council approved the 4.2 km tram line extension on Tuesday, 9 votes to "
        "4 [ref_1]. Construction should start in spring 2027, with trams running from late "
        "2029 [ref_2]."
    )
    talk.exchange(completion("tram-2", final, reasoning="Both sources agree.", usage=(1240, 48, 6)))
    return fixture(
        "web_search_mcp_mode",
        "WEB_SEARCH_MODE=auto on the Coding Plan endpoint (mcp): the model calls search_web, "
        "the persona calls the Web Search MCP server's tool, parses its double-encoded "
        "result and numbers the results as citations.",
        text,
        talk,
        endpoint="coding",
        content=final.replace("[ref_1]", "[1]").replace("[ref_2]", "[2]"),
        stop_reason="completed",
        rounds=2,
        citations=[item["link"] for item in TRAM_RESULTS],
    )


KING_TIDES_URL = "https://tides.example.ca/faq/king-tides"
KING_TIDES_TITLE = "King tides: questions and answers"
KING_TIDES_PAGE = (
    "# King tides: questions and answers\n\nKing tides are the highest tides of the year. "
    "They happen when the Moon is closest to the Earth during a new or full moon, and on this "
    "coast they come in November, December and January, often in the morning."
)
KING_TIDES_ANSWER = (
    "King tides are the year's highest tides, when a close Moon meets a new or full moon; "
    "here they come from November to January, often in the morning [ref_1]."
)


def _reader_turn(mcp: bool) -> Fixture:
    # Two questions: fixtures with the same first request would be ambiguous (0402).
    if mcp:
        text = f"// when do king tides happen, according to {KING_TIDES_URL}?"
    else:
        text = f"// what does {KING_TIDES_URL} say about when king tides happen?"
    path = CODING_CHAT if mcp else Conversation(text).path
    talk = Conversation(text, web_tools=[*FUNCTION_TOOLS, CLIENT_SEARCH_TOOL, READER_TOOL],
                        path=path)  # fmt: skip
    seed = "king-mcp" if mcp else "king"
    first = completion(
        f"{seed}-1",
        "",
        reasoning="The user gave a page; read it.",
        calls=[call(seed, "read_url", {"url": KING_TIDES_URL}, 0)],
        usage=(860, 30, 8),
    )
    mode = "mcp (auto on the coding endpoint)" if mcp else "client"
    talk.exchange(first, note=f"WEB_SEARCH_MODE={mode}: a // message with a URL offers read_url")
    if mcp:
        found = talk.mcp_read(KING_TIDES_URL, KING_TIDES_TITLE, KING_TIDES_PAGE)
    else:
        found = talk.read(KING_TIDES_URL, KING_TIDES_TITLE, KING_TIDES_PAGE)
    talk.run_tools(first, [found])
    talk.exchange(
        completion(
            f"{seed}-2", KING_TIDES_ANSWER, reasoning="The page says it.", usage=(1200, 40, 5)
        )
    )
    route = "the Web Reader MCP server's webReader tool" if mcp else "the Web Reader API"
    return fixture(
        "web_reader_mcp_mode" if mcp else "web_reader_client_mode",
        f"WEB_SEARCH_MODE={mode}: a // message holding a URL offers read_url; the persona "
        f"reads the page through {route} and cites it with its title and link.",
        text,
        talk,
        persona="scout" if mcp else "scout-client",
        endpoint="coding" if mcp else "general",
        content=KING_TIDES_ANSWER.replace("[ref_1]", "[1]"),
        stop_reason="completed",
        rounds=2,
        citations=[KING_TIDES_URL],
    )


def web_reader_client_mode() -> Fixture:
    return _reader_turn(mcp=False)


def web_reader_mcp_mode() -> Fixture:
    return _reader_turn(mcp=True)


def function_two_rounds() -> Fixture:
    text = "// what is 17% of 2,340?"
    talk = Conversation(text)
    first = completion(
        "percent-1",
        "",
        reasoning="Use the calculator: 2340 * 0.17.",
        calls=[call("percent", "calculate", {"expression": "2340 * 0.17"}, 0)],
    )
    talk.exchange(first)
    talk.run_tools(first)
    final = "17% of 2,340 is 397.8."
    talk.exchange(completion("percent-2", final, reasoning="The tool says 397.8."))
    return fixture(
        "function_two_rounds",
        "A custom function over two rounds: a calculate call, its result, the final answer.",
        text,
        talk,
        content=final,
        stop_reason="completed",
        rounds=2,
        citations=[],
    )


def parallel_calls() -> Fixture:
    text = "// convert 10 km to miles, 70 kg to pounds and 20 C to Fahrenheit"
    talk = Conversation(text)
    first = completion(
        "parallel-1",
        "I'll convert all three at once.",
        reasoning="Three independent conversions: call convert_units three times in parallel.",
        calls=[
            call("parallel", "convert_units", {"value": 10, "from_unit": "km", "to_unit": "mi"}, 0),
            call("parallel", "convert_units", {"value": 70, "from_unit": "kg", "to_unit": "lb"}, 1),
            call("parallel", "convert_units", {"value": 20, "from_unit": "C", "to_unit": "F"}, 2),
        ],
        usage=(640, 120, 30),
    )
    talk.exchange(first, note="three parallel calls in one response, one per index")
    talk.run_tools(first)
    final = "10 km is about 6.21 miles, 70 kg is about 154.32 pounds, and 20 °C is 68 °F."
    talk.exchange(completion("parallel-2", final, reasoning="All three results are in."))
    return fixture(
        "parallel_calls",
        "Three parallel function calls in one response, answered in call order.",
        text,
        talk,
        content=final,
        stop_reason="completed",
        rounds=2,
        citations=[],
    )


def sequential_rounds() -> Fixture:
    text = "// if I run a marathon in 4 hours, what is my pace per km?"
    talk = Conversation(text)
    steps = [
        ("convert_units", {"value": 4, "from_unit": "h", "to_unit": "min"}, "Hours to minutes."),
        ("calculate", {"expression": "240 / 42.195"}, "240 minutes over 42.195 km."),
        ("calculate", {"expression": "(240 / 42.195 - 5) * 60"}, "The fraction in seconds."),
    ]
    for number, (name, arguments, thought) in enumerate(steps, start=1):
        answer = completion(
            f"pace-{number}",
            "",
            reasoning=thought,
            calls=[call(f"pace-{number}", name, arguments, 0)],
        )
        talk.exchange(answer, note=f"tool round {number} of 3")
        talk.run_tools(answer)
    final = "A 4-hour marathon is a pace of about 5:41 per kilometre (5.69 minutes per km)."
    talk.exchange(completion("pace-4", final, reasoning="5 minutes and about 41 seconds."))
    return fixture(
        "sequential_rounds",
        "Three sequential tool rounds, each using the previous result, then the answer.",
        text,
        talk,
        content=final,
        stop_reason="completed",
        rounds=4,
        citations=[],
    )


CAP = 4  # scout's max_tool_rounds


def runaway_tool_calls() -> Fixture:
    text = "// calculate pi to ever more digits"
    talk = Conversation(text)
    for number in range(1, CAP + 1):
        digits = number * 2
        answer = completion(
            f"pi-{number}",
            "",
            reasoning=f"Try {digits} digits.",
            calls=[call(f"pi-{number}", "calculate", {"expression": f"round(pi, {digits})"}, 0)],
        )
        talk.exchange(answer, note=f"tool round {number}; the model never stops on its own")
        talk.run_tools(answer)
    final = "Pi is about 3.14159265 to 8 decimal places; I stopped refining there."
    talk.exchange(
        completion("pi-final", final, reasoning="No tools left; answer with what I have."),
        tools=False,
        forced=True,
        note="the cap (max_tool_rounds=4) is reached: no tools, and the instruction to answer",
    )
    return fixture(
        "runaway_tool_calls",
        "A runaway model that calls a tool every round: after 4 tool rounds (scout's cap) the "
        "persona makes one last call without tools and stops with stop_reason max_rounds.",
        text,
        talk,
        settings={"max_tool_rounds": CAP},
        content=final,
        stop_reason="max_rounds",
        rounds=CAP + 1,
        citations=[],
    )


HELPER_SYSTEM = "You are Helper, a friendly and concise assistant."


def _helper(name: str, text: str, steps: list[tuple[str, dict[str, Any]]], final: str) -> Fixture:
    """A question to the ``helper`` persona: its function tools offered on every message
    (tools_always, no web search), ``steps`` answered by one tool call each, then ``final``."""
    talk = Conversation(text, always=FUNCTION_TOOLS)
    talk.messages[0]["content"] = HELPER_SYSTEM
    for number, (tool, arguments) in enumerate(steps, start=1):
        answer = completion(
            f"{name}-{number}", "", reasoning=f"Use {tool}.", calls=[call(name, tool, arguments, 0)]
        )
        talk.exchange(answer)
        talk.run_tools(answer)
    talk.exchange(completion(f"{name}-final", final, reasoning="Answer briefly."))
    return fixture(
        name,
        f"The helper persona (tools on every message, no web search): {len(steps)} tool "
        "call(s), then the answer, so the offline page has questions for helper too.",
        text,
        talk,
        persona="helper",
        content=final,
        stop_reason="completed",
        rounds=len(steps) + 1,
        citations=[],
    )


def helper_percent() -> Fixture:
    return _helper(
        "helper_percent",
        "What is 15% of 80?",
        [("calculate", {"expression": "80 * 0.15"})],
        "15% of 80 is 12.",
    )


def helper_convert() -> Fixture:
    return _helper(
        "helper_convert",
        "How many miles is 5 km?",
        [("convert_units", {"value": 5, "from_unit": "km", "to_unit": "mi"})],
        "5 km is about 3.11 miles.",
    )


def helper_hello() -> Fixture:
    return _helper(
        "helper_hello",
        "Hello! What can you do?",
        [],
        "Hi! I can do arithmetic, convert units and tell the date and time. Ask away.",
    )


KEEPER_FACT = "The user's cat is called Miso."


def keeper_remember() -> Fixture:
    """The keeper persona (personas/examples/keeper.toml, [memory]) keeps a fact with its
    ``remember`` tool: the first chat of the offline memory demo."""
    talk = Conversation("Remember that my cat is called Miso.", always=MEMORY_TOOLS)
    talk.messages[0]["content"] = KEEPER_SYSTEM
    answer = completion(
        "keeper_remember-1",
        "",
        calls=[call("keeper_remember", "remember", {"fact": KEEPER_FACT}, 0)],
    )
    talk.exchange(answer)
    talk.run_tools(answer, results=[f"Remembered: {KEEPER_FACT}"])
    final = "Got it: I will remember that your cat is called Miso."
    talk.exchange(completion("keeper_remember-final", final))
    return fixture(
        "keeper_remember",
        "A persona with memory keeps a fact about the user (remember), for its next chats.",
        "Remember that my cat is called Miso.",
        talk,
        persona="keeper",
        content=final,
        stop_reason="completed",
        rounds=2,
        citations=[],
    )


def keeper_recall() -> Fixture:
    """The keeper persona answers from what it keeps: the second chat of the memory demo (its
    instructions carry the kept fact in their memory block)."""
    talk = Conversation("What is my cat called?", always=MEMORY_TOOLS)
    talk.messages[0]["content"] = KEEPER_SYSTEM
    final = "Your cat is called Miso: you told me so before."
    talk.exchange(completion("keeper_recall-final", final))
    return fixture(
        "keeper_recall",
        "A persona with memory answers from a fact kept in an earlier chat.",
        "What is my cat called?",
        talk,
        persona="keeper",
        content=final,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )


PICTURE_FILE = "sun_over_sea.png"
VISION_MODEL = "glm-4.6v"
PICTURE_DESCRIPTION = (
    "A small square picture in flat colours: a pale blue sky over the top two thirds, a round "
    "yellow sun in the middle of the sky, and a band of dark blue sea along the bottom. There "
    "is no text in the picture."
)


def picture_described() -> Fixture:
    """A question with a picture (sun_over_sea.png, bundled beside the fixtures) to a persona
    whose model cannot see: the vision model describes the picture first, the persona's model
    answers from the description (docs/design/0328). The picture is recorded by its hash."""
    text = "what is in this picture?"
    data = (bundled_fixtures_dir() / PICTURE_FILE).read_bytes()
    (picture,) = read_pictures([data_url(data, "image/png")], max_count=1, max_bytes=len(data))
    describing = description_request(VISION_MODEL, picture, text)
    request = describing.model_dump(mode="json", exclude_none=True)
    request["messages"][1]["content"][1]["image_url"]["url"] = f"sha256:{picture.sha256}"
    seen = completion("picture_described-vision", PICTURE_DESCRIPTION, usage=(310, 48, 0))
    seen["model"] = VISION_MODEL
    talk = Conversation(text)
    talk.exchanges.append(
        {
            "request": {"method": "POST", "path": CHAT, "body": request},
            "response": {"status": 200, "headers": JSON_HEADERS, "body": seen},
            "note": "the vision model describes the picture for a model that cannot see",
        }
    )
    talk.messages[1]["content"] = user_content(text, [picture.described(PICTURE_DESCRIPTION)])
    answer = (
        "It is a simple picture of a yellow sun in a pale blue sky above a dark blue sea, "
        "like a calm day at the coast."
    )
    talk.exchange(completion("picture_described-answer", answer, usage=(160, 30, 6)))
    found = fixture(
        "picture_described",
        "A question with a picture to the default persona, whose model cannot see: the vision "
        "model's description, then the answer from it.",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )
    return found.model_copy(update={"pictures": [PICTURE_FILE]})


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


RATE_LIMIT = _error(
    "1302",
    "High concurrency usage of this API, please reduce concurrency or contact customer service "
    "to increase limits",
)


def rate_limited_then_ok() -> Fixture:
    text = "Suggest a name for a grey cat."
    talk = Conversation(text)
    talk.exchange(RATE_LIMIT, status=429, note="HTTP 429 with business code 1302: retryable")
    talk.exchange(RATE_LIMIT, status=429, note="the same request again, rate-limited again")
    answer = "How about Ash? It suits a grey cat and is easy to call."
    talk.exchange(completion("cat", answer, reasoning="A short, fitting name."))
    return fixture(
        "rate_limited_then_ok",
        "429/1302 twice, then success: identical requests replay in order and the client's "
        "retry policy gets through.",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
    )


def insufficient_balance() -> Fixture:
    text = "Write a haiku about the sea."
    talk = Conversation(text)
    talk.exchange(
        _error("1113", "Your account is in arrears, please recharge and try again"),
        status=429,
        note="HTTP 429 like a rate limit, but 1113 must not be retried",
    )
    return fixture(
        "insufficient_balance",
        "1113 (no balance) as HTTP 429: not retried; the error reaches the caller.",
        text,
        talk,
        error={"type": "InsufficientBalanceError", "code": "1113"},
    )


def content_filter() -> Fixture:
    text = "Repeat the phrase the moderation filter blocks."
    talk = Conversation(text)
    talk.exchange(
        _error(
            "1301",
            "System detected potentially unsafe or sensitive content in input or generation. "
            "Please avoid using prompts that may generate sensitive content. Thank you for your "
            "cooperation.",
        ),
        status=400,
    )
    return fixture(
        "content_filter",
        "1301 (unsafe content): the persona ends the turn with a short notice and "
        "stop_reason content_filter.",
        text,
        talk,
        content=CONTENT_FILTER_NOTICE,
        stop_reason="content_filter",
    )


def stream_broken() -> Fixture:
    text = "Tell me a short story about a lighthouse keeper."
    talk = Conversation(text, stream=True)
    story = (
        "Every night for forty years, Mara climbed the hundred steps of the lighthouse and lit "
        "the lamp. One stormy evening a small boat answered its light with three short flashes, "
        "and she knew her brother had finally come home."
    )
    talk.exchange(
        completion("story", story, reasoning="A gentle, short story.", usage=(60, 70, 6)),
        faults=[{"kind": "break_stream", "after_events": 4, "times": 1}],
        note="the connection drops after four events; a second attempt streams it whole",
    )
    return fixture(
        "stream_broken",
        "A stream broken mid-way (the connection drops after four events, once): the text "
        "already shown cannot be retried, so the turn fails with a connection error.",
        text,
        talk,
        error={"type": "APIConnectionError"},
    )


def reasoning_with_tools() -> Fixture:
    text = "// how many minutes are in a fortnight?"
    talk = Conversation(text, stream=True)
    first = completion(
        "fortnight-1",
        "",
        reasoning="A fortnight is 14 days. Minutes: 14 * 24 * 60. Use the calculator.",
        calls=[call("fortnight", "calculate", {"expression": "14 * 24 * 60"}, 0, stream=True)],
        usage=(700, 50, 20),
    )
    talk.exchange(first, note="streamed reasoning, then one complete tool call in one delta")
    talk.run_tools(first)
    final = "A fortnight has 20,160 minutes (14 days x 24 hours x 60 minutes)."
    talk.exchange(
        completion(
            "fortnight-2", final, reasoning="The calculator says 20160.", usage=(780, 40, 8)
        ),
        note="the echoed assistant message carries reasoning_content unchanged",
    )
    return fixture(
        "reasoning_with_tools",
        "Streamed reasoning_content with a tool call; the next request echoes the reasoning "
        "on the assistant tool-call message (interleaved thinking).",
        text,
        talk,
        content=final,
        stop_reason="completed",
        rounds=2,
        citations=[],
    )


def tool_stream_fragments() -> Fixture:
    text = "// how many seconds are in a leap year?"
    talk = Conversation(text, stream=True)
    first = completion(
        "leap-1",
        "",
        reasoning="366 days of 24 hours of 3600 seconds. Use the calculator.",
        calls=[call("leap", "calculate", {"expression": "366 * 24 * 60 * 60"}, 0, stream=True)],
        usage=(720, 44, 16),
    )
    talk.exchange(
        first,
        fragments=True,
        note="tool_stream: the call's arguments arrive in fragments; id and name come first",
    )
    talk.run_tools(first)
    final = "A leap year has 31,622,400 seconds (366 x 24 x 60 x 60)."
    talk.exchange(
        completion("leap-2", final, reasoning="The calculator says 31622400.", usage=(800, 30, 6)),
        note="the request echoes the call with its arguments joined by index",
    )
    return fixture(
        "tool_stream_fragments",
        "A streamed call with tool_stream: true (GLM-4.6 and later): the function's arguments "
        "come in fragments of one index, joined by the client before the tool runs.",
        text,
        talk,
        content=final,
        stop_reason="completed",
        rounds=2,
        citations=[],
    )


def envelope_wrapped() -> Fixture:
    text = "Say hello in French."
    talk = Conversation(text)
    inner = completion("envelope", "Bonjour !", reasoning="French greeting.", usage=(30, 10, 3))
    talk.exchange(
        {"code": 200, "msg": "Operation successful", "success": True, "data": inner},
        note="a gateway wraps the completion in Zhipu's management-API envelope",
    )
    return fixture(
        "envelope_wrapped",
        "The {code, msg, success, data} envelope around a completion: the client unwraps it.",
        text,
        talk,
        content="Bonjour !",
        stop_reason="completed",
        rounds=1,
    )


def web_search_nanaimo_today() -> Fixture:
    answer = completion(
        "nanaimo-today",
        NANAIMO_ANSWER,
        reasoning="Today's conditions and tonight's forecast are in the results.",
        usage=(1440, 96, 12),
        web_search=NANAIMO_SOURCES,
    )
    return _nanaimo_turn(
        "web_search_nanaimo_today",
        "The question the Telegram bot's /start and /help and the CLI's bare // suggest: the "
        "built-in web_search server-side in one call, sources in web_search[].",
        "// weather in Nanaimo today",
        answer,
    )


# The README's openai-agents example: the client's own get_weather tool (docs/design/0612).
WEATHER_QUESTION = "What is the weather in Nanaimo?"
WEATHER_RESULT = "Light rain, 9 C"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"title": "City", "type": "string"}},
            "required": ["city"],
            "title": "get_weather_args",
            "additionalProperties": False,
        },
    },
}


def client_tool_weather() -> Fixture:
    talk = Conversation(WEATHER_QUESTION, always=[WEATHER_TOOL])
    weather = call("client-weather", "get_weather", {"city": "Nanaimo"}, 0)
    asked = completion("client-weather-1", "", calls=[weather])
    talk.exchange(asked, note="the model calls the client's tool: the turn ends with the call")
    talk.run_tools(asked, results=[WEATHER_RESULT])
    answer = "It is raining lightly in Nanaimo right now, at about 9 °C."
    talk.exchange(
        completion("client-weather-2", answer, usage=(160, 18, 0)),
        note="the client ran get_weather and sent its result back: the model answers from it",
    )
    found = fixture(
        "client_tool_weather",
        "An OpenAI client's own tool through the service (the README's openai-agents example, "
        "LangChain's bind_tools): the model calls get_weather, the client runs it and sends the "
        "result, the model answers from it.",
        WEATHER_QUESTION,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )
    return found.model_copy(update={"client": ClientTurn(tools=[WEATHER_TOOL])})


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "celsius": {"type": "number"},
        "conditions": {"type": "string"},
    },
    "required": ["city", "celsius", "conditions"],
    "additionalProperties": False,
}
WEATHER_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "weather", "schema": WEATHER_SCHEMA},
}


def json_schema_weather() -> Fixture:
    text = "Describe the weather in Nanaimo."
    talk = Conversation(text)
    format_ = JsonSchemaFormat(name="weather", schema=WEATHER_SCHEMA)
    instruction = {"role": "system", "content": schema_instruction(format_).content}
    talk.messages.insert(1, instruction)
    answer = '{"city": "Nanaimo", "celsius": 9, "conditions": "light rain"}'
    talk.exchange(
        completion("json-schema-weather", answer, usage=(190, 20, 0)),
        note="json_schema goes upstream as json_object, with the schema in a system message",
    )
    talk.exchanges[0]["request"]["body"]["response_format"] = {"type": "json_object"}
    found = fixture(
        "json_schema_weather",
        "An OpenAI client's response_format json_schema through the service: sent as "
        "json_object with the schema in the instructions, the answer validated against it.",
        text,
        talk,
        content=answer,
        stop_reason="completed",
        rounds=1,
        citations=[],
    )
    return found.model_copy(update={"client": ClientTurn(response_format=WEATHER_FORMAT)})


SCENARIOS: list[Callable[[], Fixture]] = [
    plain_answer,
    web_search_hello,
    web_search_nanaimo,
    web_search_nanaimo_stream,
    web_search_nanaimo_today,
    web_search_tool_calls,
    web_search_no_markers,
    web_search_client_mode,
    web_search_mcp_mode,
    web_reader_client_mode,
    web_reader_mcp_mode,
    function_two_rounds,
    parallel_calls,
    sequential_rounds,
    runaway_tool_calls,
    rate_limited_then_ok,
    insufficient_balance,
    content_filter,
    stream_broken,
    reasoning_with_tools,
    tool_stream_fragments,
    envelope_wrapped,
    helper_percent,
    helper_convert,
    helper_hello,
    keeper_remember,
    keeper_recall,
    picture_described,
    client_tool_weather,
    json_schema_weather,
]


def build_all() -> dict[str, str]:
    """File name -> JSON text of every bundled fixture."""
    return {f"{scenario.__name__}.json": scenario().to_json() for scenario in SCENARIOS}


def main(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for name, text in build_all().items():
        (target / name).write_text(text, encoding="utf-8")
        print(f"wrote {target / name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else bundled_fixtures_dir())
