"""The floor: a hand-written loop over one pooled ``httpx.AsyncClient``."""

from __future__ import annotations

import json
from typing import Any

import httpx

from benchmarks import job
from benchmarks.clients import Driver
from benchmarks.transports import build_http_client


class RawHttpx(Driver):
    """Plain dicts, ``json.dumps``/``json.loads``, one shared client."""

    def __init__(self, base_url: str, options: dict[str, Any]) -> None:
        self.url = f"{base_url}/chat/completions"
        headers = {"Authorization": f"Bearer {job.API_KEY}"}
        # No options: httpx's own defaults (100 connections, 20 kept alive), as users get them.
        self.http = build_http_client(options, headers) or httpx.AsyncClient(
            headers=headers, timeout=60.0
        )
        self.tools = job.TOOLS

    async def _post(self, messages: list[dict[str, Any]]) -> Any:
        body = {"model": job.MODEL, "messages": messages, "tools": self.tools}
        response = await self.http.post(self.url, json=body)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]

    async def _answer(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The tool loop: each round's calls and results appended to ``messages``; the answer."""
        message: dict[str, Any] = await self._post(messages)
        while message.get("tool_calls"):
            messages.append(message)
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                result = job.get_weather(**args)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            message = await self._post(messages)
        return message

    async def converse(self) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": job.SYSTEM},
            {"role": "user", "content": job.QUESTION},
        ]
        return str((await self._answer(messages))["content"])

    async def _stream(
        self, messages: list[dict[str, Any]], first_delays: list[float]
    ) -> tuple[dict[str, Any], int]:
        body = {"model": job.MODEL, "messages": messages, "tools": self.tools, "stream": True}
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        deltas = 0
        async with self.http.stream("POST", self.url, json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"]
                if delta.get("content"):
                    if not text:
                        delay = job.first_text_delay(delta["content"])
                        if delay is not None:
                            first_delays.append(delay)
                    text.append(delta["content"])
                    deltas += 1
                for call in delta.get("tool_calls") or ():
                    calls[call["index"]] = call
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return message, deltas

    async def converse_stream(self, first_delays: list[float]) -> tuple[str, int]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": job.SYSTEM},
            {"role": "user", "content": job.QUESTION},
        ]
        message, deltas = await self._stream(messages, first_delays)
        while message.get("tool_calls"):
            messages.append(message)
            for call in message["tool_calls"]:
                args = json.loads(call["function"]["arguments"])
                result = job.get_weather(**args)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            message, deltas = await self._stream(messages, first_delays)
        return job.strip_stamp(str(message["content"])), deltas

    async def aclose(self) -> None:
        await self.http.aclose()


async def open_driver(base_url: str, options: dict[str, Any]) -> Driver:
    """Build the driver."""
    return RawHttpx(base_url, options)
