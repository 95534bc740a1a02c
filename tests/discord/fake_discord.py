"""A fake Discord on loopback for the Discord bot's end-to-end tests: REST and the gateway.

The real ``generic-framework discord`` process (discord.py on aiohttp) talks to this server as
it would to Discord: REST under ``{api_url}`` (``DISCORD_API_URL``, Discord's ``/api/v10``),
the bot's token in ``Authorization: Bot ...``, and the gateway WebSocket whose address
``GET /gateway/bot`` gives. The gateway speaks Discord's protocol: ``HELLO`` with a heartbeat
interval, ``IDENTIFY`` answered by ``READY`` (a session id and a ``resume_gateway_url``) and one
``GUILD_CREATE``, heartbeats acknowledged, events dispatched with growing sequence numbers and
zlib-stream compression when the client asks for it, and :meth:`FakeDiscord.reconnect`: op 7
``RECONNECT``, after which the client must ``RESUME`` its session and is sent the events it
missed, then ``RESUMED``.

A test sends DMs and guild messages (:meth:`FakeDiscord.say`), runs slash commands
(:meth:`FakeDiscord.command`), scripts 429s (:meth:`FakeDiscord.fail`), and reads every REST
call and each channel's messages as they stand after edits (:meth:`FakeDiscord.transcript`).
What Discord refuses is refused: a message over 2,000 characters (400, code 50035), a bad
token (401). The token never reaches a log: uvicorn's access log is off.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord_payloads as p
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

__all__ = ["TOKEN", "Call", "FakeDiscord"]

TOKEN = "OTAwMDAwMDAwMDAwMDAwMDAx.GfAkeD.discord-test-token-never-logged"
LIMIT = 2000


@dataclass(frozen=True, slots=True)
class Call:
    """One REST request: ``at`` is ``time.monotonic()`` when it arrived."""

    method: str
    path: str
    body: dict[str, Any]
    at: float
    status: int


class _Session:
    """One gateway session: its events, for a resume."""

    def __init__(self) -> None:
        self.id = uuid.uuid4().hex
        self.events: list[dict[str, Any]] = []
        self.socket: WebSocket | None = None
        self.deflate: Any = None


class FakeDiscord:
    """Discord's REST API and gateway on loopback (uvicorn in a background thread)."""

    def __init__(self, token: str = TOKEN, heartbeat_ms: int = 1000) -> None:
        self.token, self.heartbeat_ms = token, heartbeat_ms
        self.api_url = self.gateway_url = ""
        self.bot = p.user(p.BOT_ID, "persona-bot", bot=True)
        self.calls: list[Call] = []
        self.gateway_log: list[str] = []  # "identify", "resume", "heartbeat"... in order
        self.commands: list[dict[str, Any]] = []
        self.channels: dict[int, list[dict[str, Any]]] = {}
        self.guild_channels: list[dict[str, Any]] = []
        self.members: list[dict[str, Any]] = []
        self._ids = p.snowflakes()
        self._faults: dict[str, list[float]] = {}
        self._session: _Session | None = None
        self._cond = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._tokens = itertools.count(1)

    # -- life cycle --------------------------------------------------------------------------

    def __enter__(self) -> FakeDiscord:
        app = Starlette(
            routes=[
                WebSocketRoute("/gateway", self._gateway),
                Route("/api/v10/{path:path}", self._rest, methods=["GET", "POST", "PUT", "PATCH"]),
            ]
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, lifespan="off", access_log=False, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="fake-discord", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Discord did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.api_url = f"http://127.0.0.1:{port}/api/v10"
        self.gateway_url = f"ws://127.0.0.1:{port}/gateway"
        return self

    def _run(self) -> None:
        assert self._server is not None
        self._loop = loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._server.serve())
        finally:
            loop.close()

    def __exit__(self, *exc: object) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10.0)

    # -- scripting ---------------------------------------------------------------------------

    def person(self, ident: int, name: str) -> dict[str, Any]:
        """A user the fake knows (a member of the guild)."""
        someone = p.user(ident, name)
        self.members.append(p.member(someone))
        return someone

    def add_channel(self, ident: int, name: str) -> None:
        """A text channel of the guild (sent in ``GUILD_CREATE``)."""
        self.guild_channels.append(p.channel(ident, name))

    def say(
        self,
        author: dict[str, Any],
        channel_id: int,
        content: str,
        *,
        guild: bool = False,
        mentions: list[dict[str, Any]] | None = None,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``author`` writes ``content`` in a DM channel or a guild channel: the message is
        kept and dispatched (``MESSAGE_CREATE``)."""
        data = p.message(
            next(self._ids),
            channel_id,
            author,
            content,
            guild_id=p.GUILD_ID if guild else None,
            mentions=mentions,
            referenced=reply_to,
        )
        with self._cond:
            self.channels.setdefault(channel_id, []).append(data)
        self.dispatch("MESSAGE_CREATE", data)
        return data

    def command(
        self,
        command_name: str,
        person: dict[str, Any],
        channel_id: int,
        *,
        guild: bool,
        **options: str,
    ) -> str:
        """``person`` runs the slash command ``command_name`` with ``options``; the
        interaction's token."""
        command = next(c for c in self.commands if c["name"] == command_name)
        token = f"interaction-{next(self._tokens)}"
        guild_id = p.GUILD_ID if guild else None
        data = p.interaction(next(self._ids), token, command, options, person, channel_id, guild_id)
        self.dispatch("INTERACTION_CREATE", data)
        return token

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send an event to the connected client (kept for a resume when none is)."""
        with self._cond:
            session = self._session
            assert session is not None, "no gateway session: the bot has not identified"
            payload = {"op": 0, "t": event, "s": len(session.events) + 1, "d": data}
            session.events.append(payload)
            socket = session.socket
        if socket is not None and self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._send(session, payload), self._loop)

    def reconnect(self) -> None:
        """Ask the client to reconnect (op 7), as Discord does before moving a session."""
        with self._cond:
            session = self._session
        assert session is not None and self._loop is not None
        asyncio.run_coroutine_threadsafe(self._send(session, {"op": 7, "d": None}), self._loop)

    def fail(self, route: str, retry_after: float, times: int = 1) -> None:
        """The next ``times`` requests whose ``METHOD /path`` matches the ``route`` regex answer
        429 with ``retry_after``."""
        with self._cond:
            self._faults.setdefault(route, []).extend([retry_after] * times)

    # -- reading -----------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait until ``predicate`` holds (checked after every request and gateway event)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not within {timeout} s; calls:\n{self.summary()}")
                self._cond.wait(left)

    def calls_to(self, method: str, pattern: str) -> list[Call]:
        """The REST calls of ``method`` whose path matches the ``pattern`` regex."""
        with self._cond:
            return [c for c in self.calls if c.method == method and re.search(pattern, c.path)]

    def bot_messages(self, channel_id: int) -> list[dict[str, Any]]:
        """What the bot shows in a channel, after the edits."""
        with self._cond:
            return [
                m for m in self.channels.get(channel_id, []) if m["author"]["id"] == self.bot["id"]
            ]

    def transcript(self, channel_id: int) -> str:
        """A channel as read: one ``name: text`` block per message."""
        with self._cond:
            shown = self.channels.get(channel_id, [])
            return "\n".join(f"{m['author']['username']}: {m['content']}" for m in shown)

    def summary(self) -> str:
        """The REST calls so far, one line each."""
        return "\n".join(f"  {c.method} {c.path} {c.status}" for c in self.calls) or "  (none)"

    # -- gateway -----------------------------------------------------------------------------

    async def _send(self, session: _Session, payload: dict[str, Any]) -> None:
        socket = session.socket
        if socket is None:
            return
        text = json.dumps(payload)
        try:
            if session.deflate is None:
                await socket.send_text(text)
            else:
                data = session.deflate.compress(text.encode()) + session.deflate.flush(
                    zlib.Z_SYNC_FLUSH
                )
                await socket.send_bytes(data)
        except (RuntimeError, WebSocketDisconnect, OSError):
            return
        if payload["op"] == 7:
            await socket.close(4000)

    def _log(self, what: str) -> None:
        with self._cond:
            self.gateway_log.append(what)
            self._cond.notify_all()

    async def _gateway(self, socket: WebSocket) -> None:
        await socket.accept()
        link = _Session()  # this connection, until it identifies or resumes
        link.socket = socket
        if socket.query_params.get("compress") == "zlib-stream":
            link.deflate = zlib.compressobj()
        await self._send(link, {"op": 10, "d": {"heartbeat_interval": self.heartbeat_ms}})
        session: _Session | None = None
        try:
            while True:
                frame = json.loads(await socket.receive_text())
                op, data = frame.get("op"), frame.get("d")
                if op == 1:
                    self._log("heartbeat")
                    await self._send(session or link, {"op": 11, "d": None})
                elif op == 2:
                    if data.get("token") != self.token:
                        await socket.close(4004)
                        return
                    session = await self._identify(link)
                elif op == 6:
                    session = await self._resume(link, data)
                    if session is None:
                        return
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            if session is not None and session.socket is socket:
                session.socket = None
            self._log("closed")

    async def _identify(self, link: _Session) -> _Session:
        with self._cond:
            self._session = link
        self._log("identify")
        port = self.gateway_url
        ready = {
            "v": 10,
            "user": self.bot,
            "guilds": [{"id": str(p.GUILD_ID), "unavailable": True}],
            "session_id": link.id,
            "resume_gateway_url": port,
            "application": {"id": str(p.APPLICATION_ID), "flags": 0},
            "private_channels": [],
            "relationships": [],
            "shard": [0, 1],
        }
        self.dispatch("READY", ready)
        self.dispatch("GUILD_CREATE", p.guild(self.guild_channels, self.members))
        return link

    async def _resume(self, link: _Session, data: dict[str, Any]) -> _Session | None:
        with self._cond:
            session = self._session
        valid = (
            session is not None
            and data.get("token") == self.token
            and data.get("session_id") == session.id
        )
        if not valid or session is None:
            await self._send(link, {"op": 9, "d": False})
            return None
        self._log("resume")
        session.socket, session.deflate = link.socket, link.deflate
        for payload in session.events[int(data.get("seq") or 0) :]:
            await self._send(session, payload)
        self.dispatch("RESUMED", {})
        return session

    # -- REST --------------------------------------------------------------------------------

    async def _rest(self, request: Request) -> Response:
        at = time.monotonic()
        path = "/" + request.path_params["path"]
        raw = await request.body()
        body = json.loads(raw) if raw and raw[:1] in (b"{", b"[") else {}
        status, answer = await asyncio.to_thread(self._answer, request, path, body)
        with self._cond:
            self.calls.append(
                Call(
                    request.method,
                    path,
                    body if isinstance(body, dict) else {"items": body},
                    at,
                    status,
                )
            )
            self._cond.notify_all()
        headers = {"Via": "1.1 google"}  # as Discord's (discord.py reads a 429 without it as a ban)
        if status == 204:
            return Response(status_code=204, headers=headers)
        if status == 429:
            headers["Retry-After"] = str(answer["retry_after"])
        return JSONResponse(answer, status_code=status, headers=headers)

    def _answer(self, request: Request, path: str, body: Any) -> tuple[int, Any]:
        is_webhook = path.startswith(("/webhooks/", "/interactions/"))
        if not is_webhook and request.headers.get("authorization") != f"Bot {self.token}":
            return 401, {"message": "401: Unauthorized", "code": 0}
        route = f"{request.method} {path}"
        with self._cond:
            for pattern, waits in self._faults.items():
                if waits and re.search(pattern, route):
                    wait = waits.pop(0)
                    return 429, {
                        "message": "You are being rate limited.",
                        "retry_after": wait,
                        "global": False,
                    }
        return self._route(request.method, path, body)

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == "/users/@me":
            return 200, self.bot
        if path == "/oauth2/applications/@me":
            return 200, p.application(self.bot)
        if path == "/gateway/bot":
            limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
            return 200, {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}
        if re.fullmatch(r"/applications/\d+/commands", path) and method == "PUT":
            self.commands = [
                {
                    **c,
                    "id": str(next(self._ids)),
                    "application_id": str(p.APPLICATION_ID),
                    "version": "1",
                }
                for c in body
            ]
            return 200, self.commands
        if match := re.fullmatch(r"/channels/(\d+)/typing", path):
            return 204, None
        if match := re.fullmatch(r"/channels/(\d+)/messages", path):
            return self._post(int(match.group(1)), body)
        if match := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path):
            return self._edit(int(match.group(1)), match.group(2), body)
        if match := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path):
            channel_id = self._interaction_channel(match.group(2))
            status, sent = self._post(channel_id, body.get("data") or {})
            if status != 200:
                return status, sent
            interaction = {
                "id": match.group(1),
                "type": 2,
                "response_message_id": sent["id"],
                "response_message_loading": False,
                "response_message_ephemeral": False,
            }
            return 200, {"interaction": interaction, "resource": {"type": 4, "message": sent}}
        if match := re.fullmatch(r"/webhooks/\d+/([^/]+)", path):
            return self._post(self._interaction_channel(match.group(1)), body)
        return 404, {"message": "404: Not Found", "code": 0}

    def _interaction_channel(self, token: str) -> int:
        with self._cond:
            session = self._session
            assert session is not None
            for event in session.events:
                if event["t"] == "INTERACTION_CREATE" and event["d"]["token"] == token:
                    return int(event["d"]["channel_id"])
        raise AssertionError(f"no interaction has the token {token}")

    def _post(self, channel_id: int, body: dict[str, Any]) -> tuple[int, Any]:
        content = str(body.get("content") or "")
        if len(content) > LIMIT:
            return 400, _too_long()
        data = p.message(next(self._ids), channel_id, self.bot, content)
        data["allowed_mentions"] = body.get("allowed_mentions")
        data["flags"] = body.get("flags", 0)
        with self._cond:
            self.channels.setdefault(channel_id, []).append(data)
        return 200, data

    def _edit(self, channel_id: int, message_id: str, body: dict[str, Any]) -> tuple[int, Any]:
        content = str(body.get("content") or "")
        if len(content) > LIMIT:
            return 400, _too_long()
        with self._cond:
            for data in self.channels.get(channel_id, []):
                if data["id"] == message_id:
                    data.update(content=content, edited_timestamp=p.now())
                    data["allowed_mentions"] = body.get("allowed_mentions")
                    return 200, data
        return 404, {"message": "Unknown Message", "code": 10008}


def _too_long() -> dict[str, Any]:
    error = {
        "_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]
    }
    return {"message": "Invalid Form Body", "code": 50035, "errors": {"content": error}}
