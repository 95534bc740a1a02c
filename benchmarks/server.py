"""A lean scripted OpenAI/GLM-compatible server for the benchmarks (stdlib asyncio only).

The job is the same for every client: the first request of a conversation is answered with a call
to the first function tool offered (``{"city": ...}``), the request that carries the tool
message(s) is answered with ``"Answer: "`` followed by the tool contents joined by ``" | "``, so a
client can check that its tool really ran. ``--calls N`` asks for N parallel calls in round one.
A request that offers no function tool (the bot service's scenario) is answered at once with
``"Answer: "`` followed by the last user message.

JSON and SSE (``"stream": true``) are served in Z.AI's layout (role on every delta, the complete
tool call in one delta, ``finish_reason`` and ``usage`` on the last chunk, ``data: [DONE]``).
In a streamed answer the first content chunk's text starts with ``@<monotonic_ns>;`` taken just
before it is written, so the client can measure its own delivery delay on the same clock.

HTTP/1.1 with keep-alive, ``Content-Length`` request bodies, chunked streamed responses. The
server prints ``PORT <n>`` once it listens, and on end of standard input (or SIGTERM) prints one
JSON line with the requests served and its own CPU seconds, then exits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

_MODEL = "glm-4.7"
_CITIES = ("Paris", "Oslo", "Lima", "Pune", "Kyiv", "Rome", "Baku", "Riga")


class Script:
    """What the server answers, and the counters it reports."""

    def __init__(self, *, latency: float, calls: int, chunks: int, first_delay: float) -> None:
        self.latency = latency
        self.calls = calls
        self.chunks = chunks
        self.first_delay = first_delay
        self.requests = 0
        self.conversations = 0

    def plan(self, body: bytes) -> tuple[bool, dict[str, Any] | None, str | None]:
        """Return (stream, tool-call message or None, final text or None) for a request body."""
        request = json.loads(body)
        self.requests += 1
        messages = request.get("messages") or []
        results = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            results.append(str(message.get("content", "")))
        stream = bool(request.get("stream"))
        if results:
            return stream, None, "Answer: " + " | ".join(reversed(results))
        self.conversations += 1
        tools = request.get("tools") or []
        if not any(spec.get("type") == "function" for spec in tools):
            return stream, None, "Answer: " + _last_user_text(messages)
        name = _first_function(tools)
        calls = [
            {
                "id": f"call_{self.conversations}_{i}",
                "type": "function",
                "index": i,
                "function": {
                    "name": name,
                    "arguments": json.dumps({"city": _CITIES[i % len(_CITIES)]}),
                },
            }
            for i in range(self.calls)
        ]
        return stream, {"role": "assistant", "content": "", "tool_calls": calls}, None


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


def _first_function(tools: list[dict[str, Any]]) -> str:
    for spec in tools:
        if spec.get("type") == "function":
            return str(spec["function"]["name"])
    return "get_weather"


_USAGE = {
    "prompt_tokens": 60,
    "completion_tokens": 12,
    "total_tokens": 72,
    "prompt_tokens_details": {"cached_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0},
}


def completion_body(message: dict[str, Any], finish: str, rid: str) -> bytes:
    """A non-streamed chat completion."""
    return json.dumps(
        {
            "id": rid,
            "request_id": rid,
            "created": int(time.time()),
            "model": _MODEL,
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": _USAGE,
        }
    ).encode()


def chunk_frame(rid: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``data:`` frame; only the last chunk has ``finish_reason`` and ``usage`` (§4)."""
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    payload: dict[str, Any] = {
        "id": rid,
        "created": int(time.time()),
        "object": "chat.completion.chunk",
        "model": _MODEL,
        "choices": [choice],
    }
    if finish is not None:
        choice["finish_reason"] = finish
        payload["usage"] = _USAGE
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


_JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=UTF-8\r\n"
    b"content-length: %d\r\nconnection: keep-alive\r\n\r\n"
)
_NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n"
    b"connection: keep-alive\r\n\r\n{}"
)
_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream;charset=UTF-8\r\n"
    b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
)


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are answered in order."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.pending: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = _content_length(self.buffer[:end])
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            previous, self.pending = self.pending, None
            self.pending = asyncio.ensure_future(self.answer(body, previous))

    async def answer(self, body: bytes, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await previous
        try:
            stream, call, text = self.script.plan(body)
        except ValueError:  # not a chat request (LiteLLM's proxy probes with an empty body)
            if self.transport is not None:
                self.transport.write(_NOT_FOUND)
            return
        if self.script.latency:
            await asyncio.sleep(self.script.latency)
        rid = f"bench-{self.script.requests}"
        if stream:
            await self.stream(rid, call, text)
        elif call is not None:
            self.write_json(completion_body(call, "tool_calls", rid))
        else:
            message = {"role": "assistant", "content": text}
            self.write_json(completion_body(message, "stop", rid))

    def write_json(self, body: bytes) -> None:
        if self.transport is not None:
            self.transport.write(_JSON_HEAD % len(body) + body)

    async def stream(self, rid: str, call: dict[str, Any] | None, text: str | None) -> None:
        if self.transport is None:
            return
        self.transport.write(_SSE_HEAD)
        if call is not None:
            frames = [chunk_frame(rid, {"tool_calls": [tc]}) for tc in call["tool_calls"]]
            frames.append(chunk_frame(rid, {"role": "assistant", "content": ""}, "tool_calls"))
            self.write_frames(frames, done=True)
            return
        await asyncio.sleep(self.script.first_delay)
        pieces = _pieces(text or "", self.script.chunks)
        first = f"@{time.monotonic_ns()};" + pieces[0]
        self.write_frames([chunk_frame(rid, {"role": "assistant", "content": first})], done=False)
        rest = [chunk_frame(rid, {"role": "assistant", "content": p}) for p in pieces[1:]]
        rest.append(chunk_frame(rid, {"role": "assistant", "content": ""}, "stop"))
        await asyncio.sleep(0.002)
        self.write_frames(rest, done=True)

    def write_frames(self, frames: list[bytes], *, done: bool) -> None:
        if self.transport is None:
            return
        if done:
            frames = [*frames, b"data: [DONE]\n\n"]
        self.transport.write(
            b"".join(_chunked(f) for f in frames) + (b"0\r\n\r\n" if done else b"")
        )


def _pieces(text: str, count: int) -> list[str]:
    """Split the answer into ``count`` non-empty content pieces (padding with words)."""
    if count <= 1:
        return [text]
    return [text, *(f" w{i}" for i in range(1, count))]


def _content_length(head: bytes) -> int:
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = lower.find(b"\r\n", at + 2)
    return int(lower[at + 17 : end if end >= 0 else None])


async def serve(args: argparse.Namespace) -> None:
    """Listen, print the port, and serve until standard input closes or SIGTERM arrives."""
    script = Script(
        latency=args.latency, calls=args.calls, chunks=args.chunks, first_delay=args.first_delay
    )
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Connection(script), "127.0.0.1", args.port, backlog=4096, reuse_address=True
    )
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    fd = sys.stdin.fileno()
    loop.add_reader(fd, lambda: None if os.read(fd, 64) else stop.set())
    await stop.wait()
    server.close()
    stats = {"requests": script.requests, "cpu_s": time.process_time()}
    print(json.dumps(stats), flush=True)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (``python -m benchmarks.server``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--calls", type=int, default=1, help="tool calls in round one")
    parser.add_argument("--chunks", type=int, default=1, help="content chunks in a streamed answer")
    parser.add_argument("--first-delay", type=float, default=0.005, help="seconds before text")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
