"""The typed floor: raw httpx, with each response validated into a few small pydantic models.

What any library that hands out typed objects pays at least: pydantic imported, five models
(message, tool call, choice, usage, completion) built when the module is imported, and every
response parsed into them with ``model_validate_json``. The request side stays plain dicts, as
in the raw floor; the assistant message goes back to the server as ``model_dump`` gives it.
Streaming is the raw floor's (the rows compared against this floor are not streamed).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from benchmarks import job
from benchmarks.clients.raw_httpx import RawHttpx


class Function(BaseModel):
    """The function a tool call names, with its JSON arguments."""

    name: str
    arguments: str


class ToolCall(BaseModel):
    """One call the model asks for."""

    id: str
    type: str = "function"
    function: Function


class Message(BaseModel):
    """The assistant's message; unknown fields are kept, as a client that echoes it must."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(BaseModel):
    """One choice of the completion."""

    index: int = 0
    message: Message
    finish_reason: str | None = None


class Usage(BaseModel):
    """Token counts."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class Completion(BaseModel):
    """The whole response."""

    id: str = ""
    model: str = ""
    choices: list[Choice]
    usage: Usage | None = None


class TypedHttpx(RawHttpx):
    """The raw floor's loop, each response a validated :class:`Completion`."""

    async def _post(self, messages: list[dict[str, Any]]) -> Any:
        body = {"model": job.MODEL, "messages": messages, "tools": self.tools}
        response = await self.http.post(self.url, json=body)
        response.raise_for_status()
        completion = Completion.model_validate_json(response.content)
        return completion.choices[0].message.model_dump(exclude_none=True)


async def open_driver(base_url: str, options: dict[str, Any]) -> TypedHttpx:
    """Build the driver."""
    return TypedHttpx(base_url, options)
