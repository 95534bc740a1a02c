"""A fake Telegram Bot API server on loopback for the bot's end-to-end tests.

The real ``generic-framework telegram`` process (python-telegram-bot on httpx) talks to this
server over HTTP exactly as it would to ``https://api.telegram.org``: ``{base_url}/bot{token}/
{method}``, form-encoded bodies whose non-string fields are JSON (what the library sends), or JSON
bodies. A test queues updates (:meth:`FakeBotAPI.push`), scripts faults (:meth:`FakeBotAPI.fail`,
:attr:`FakeBotAPI.conflict`) and reads back every call and what each chat shows after the edits.

What Telegram would refuse is refused here with Telegram's wording: invalid HTML (see
``telegram_html.py``), text over 4,096 UTF-16 code units, an edit that changes nothing, polling
while a webhook is set or while another poller runs. Two deliberate differences: any ``http``
webhook URL is accepted (tests serve on loopback), and the wording of ``sendMessageDraft``'s own
refusals is this server's (the Bot API does not document them). The token never reaches a log:
uvicorn's access log is off and no record or message of this module carries it.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import httpx
import uvicorn
from bot_api_chats import ApiError, Chats, update_kind
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["Call", "FakeBotAPI", "deliver"]

TOKEN = "123456:TEST-token-never-logged"
BOT_USER: dict[str, Any] = {
    "id": 123456,
    "is_bot": True,
    "first_name": "Persona Bot",
    "username": "persona_test_bot",
}
CONFLICT_POLLING = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is "
    "running"
)
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete "
    "the webhook first"
)
# Form fields that are strings even when they look like JSON (``text="42"`` stays a string).
# fmt: off
_STRING_FIELDS = frozenset((
    "text", "parse_mode", "url", "secret_token", "callback_query_id", "action", "language_code",
    "ip_address", "inline_message_id", "business_connection_id", "caption", "data", "query",
    "title", "description",
))
_DEFAULT_ALLOWED = frozenset((
    "message", "edited_message", "channel_post", "edited_channel_post", "callback_query",
    "inline_query", "chosen_inline_result", "shipping_query", "pre_checkout_query", "poll",
    "poll_answer", "my_chat_member", "chat_join_request", "business_connection",
    "business_message", "edited_business_message", "deleted_business_messages",
    "purchased_paid_media",
))
# fmt: on
_SUMMARY_WIDTH = 200


@dataclass(frozen=True, slots=True)
class Call:
    """One request the server answered: ``at`` is ``time.monotonic()`` when it arrived."""

    method: str
    params: dict[str, Any]
    at: float
    status: int


def deliver(update: dict[str, Any], url: str, secret: str | None = None) -> int:
    """POST ``update`` to a webhook as Telegram does; the HTTP status the receiver answered."""
    headers = {} if secret is None else {"X-Telegram-Bot-Api-Secret-Token": secret}
    return httpx.post(url, json=update, headers=headers, timeout=30.0).status_code


def _decode(name: str, value: str) -> Any:
    if name in _STRING_FIELDS:
        return value
    try:
        decoded = json.loads(value)
    except ValueError:
        return value
    return value if isinstance(decoded, str) else decoded


async def _read_params(request: Request) -> dict[str, Any]:
    fields: list[tuple[str, Any]] = list(request.query_params.multi_items())
    kind = request.headers.get("content-type", "")
    body = await request.body()
    if kind.startswith("application/json") and body:
        try:
            data = json.loads(body)
        except ValueError:
            raise ApiError(400, "Bad Request: can't parse JSON object") from None
        return {**{k: _decode(k, v) for k, v in fields}, **(data if isinstance(data, dict) else {})}
    if kind.startswith("multipart/form-data"):
        form = await request.form()
        fields += [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    elif body:
        fields += parse_qsl(body.decode(), keep_blank_values=True)
    return {k: _decode(k, v) for k, v in fields}


def _answer(status: int, result: Any = None, error: ApiError | None = None) -> JSONResponse:
    if error is None:
        return JSONResponse({"ok": True, "result": result})
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": error.description}
    if error.retry_after is not None:
        body["parameters"] = {"retry_after": error.retry_after}
    return JSONResponse(body, status_code=status)


class FakeBotAPI(Chats):
    """A Bot API server on loopback (uvicorn in a background thread) that serves scripted
    updates to getUpdates and records every call."""

    def __init__(self, token: str = TOKEN, *, drafts_supported: bool = True) -> None:
        super().__init__(dict(BOT_USER))
        self.token = token
        self.base_url = ""
        self.calls: list[Call] = []
        self.webhook: dict[str, Any] | None = None
        self.drafts_supported = drafts_supported
        self.allowed_updates: list[str] | None = None
        self._conflict = False
        self._cond = threading.Condition(self._lock)
        self._queue: deque[dict[str, Any]] = deque()
        self._update_ids = itertools.count(700_000_001)
        self._faults: dict[str, deque[ApiError]] = {}
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.files: dict[str, bytes] = {}  # file_id -> bytes, served by getFile and /file/
        self._closing = False
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._methods: dict[str, Callable[[dict[str, Any]], Any]] = {
            "getMe": lambda p: {**self.bot_user, "can_join_groups": True},
            "sendMessage": self.send,
            "editMessageText": self.edit_text,
            "editMessageReplyMarkup": self.edit_markup,
            "deleteMessage": self.delete,
            "sendMessageDraft": self._draft,
            "sendChatAction": self.chat_action,
            "answerCallbackQuery": lambda p: True,
            "setMyCommands": self._set_commands,
            "deleteMyCommands": self._delete_commands,
            "getMyCommands": lambda p: self._commands.get(_command_key(p), []),
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._webhook_info,
            "getFile": self._get_file,
            "close": lambda p: True,
            "logOut": lambda p: True,
        }
        self._canonical = {name.lower(): name for name in (*self._methods, "getUpdates")}

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        self._closing = False
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._file, methods=["GET"]),
                Route("/{path:path}", self._not_found, methods=["GET", "POST"]),
            ]
        )
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            access_log=False,
            log_level="warning",
            timeout_graceful_shutdown=3,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="fake-bot-api", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Bot API server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._wake()
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10.0)
        self._server = self._thread = None

    def __enter__(self) -> FakeBotAPI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------

    @property
    def waiting_polls(self) -> int:
        """How many getUpdates long polls wait at the fake for an update right now."""
        with self._cond:
            return len(self._waiters)

    @property
    def conflict(self) -> bool:
        """True: getUpdates answers 409, as when a second poller runs (a waiting poll too)."""
        return self._conflict

    @conflict.setter
    def conflict(self, value: bool) -> None:
        with self._cond:
            self._conflict = value
            self._wake()

    def push(self, update: dict[str, Any]) -> int:
        """Queue ``update`` for getUpdates (an ``update_id`` is assigned when absent)."""
        with self._cond:
            if "update_id" not in update:
                update = {"update_id": next(self._update_ids), **update}
            self._received_in(update)
            self._queue.append(update)
            self._wake()
            return int(update["update_id"])

    def deliver(self, update: dict[str, Any]) -> int:
        """Deliver ``update`` to the registered webhook, with its secret; the HTTP status."""
        with self._cond:
            assert self.webhook, "no webhook is registered with the fake Bot API"
            url, secret = self.webhook["url"], self.webhook.get("secret_token")
            if "update_id" not in update:
                update = {"update_id": next(self._update_ids), **update}
            self._received_in(update)
        return deliver(update, url, secret)

    def fail(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: int | None = 1,
        description: str | None = None,
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``method`` answer ``status`` (429: "retry after N")."""
        if status == 429:
            description = description or f"Too Many Requests: retry after {retry_after}"
            error = ApiError(429, description, retry_after)
        else:
            error = ApiError(status, description or _DEFAULT_DESCRIPTIONS.get(status, "Error"))
        with self._cond:
            self._faults.setdefault(method, deque()).extend([error] * times)

    # -- reading -----------------------------------------------------------------------------

    def calls_to(self, method: str) -> list[Call]:
        with self._cond:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, predicate: Callable[[Call], bool], timeout: float = 20.0) -> Call:
        """The first recorded call (past or future) that ``predicate`` accepts; a predicate that
        raises ``LookupError`` or ``TypeError`` on a call does not accept it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            seen = 0
            while True:
                for call in self.calls[seen:]:
                    if _accepts(predicate, call):
                        return call
                seen = len(self.calls)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"no matching Bot API call within {timeout} s; calls seen:\n"
                        + self.summary()
                    )
                self._cond.wait(remaining)

    def summary(self) -> str:
        """The calls so far, one line each (a webhook's secret hidden), polls that got an answer
        left out."""
        with self._cond:
            start = self.calls[0].at if self.calls else 0.0
            lines = [
                f"  {call.at - start:7.3f} s {call.method} {call.status} {_shown(call.params)}"[
                    :_SUMMARY_WIDTH
                ]
                for call in self.calls
                if call.method != "getUpdates" or call.status != 200
            ]
        return "\n".join(lines) or "  (none)"

    def my_commands(self, scope: str = "default", language_code: str = "") -> list[dict[str, Any]]:
        """The commands setMyCommands registered for a scope type and language."""
        with self._cond:
            return list(self._commands.get((scope, language_code), []))

    # -- the HTTP side -----------------------------------------------------------------------

    async def _file(self, request: Request) -> Response:
        """A file's bytes, as ``https://api.telegram.org/file/bot<token>/<file_path>``."""
        token = str(request.path_params["token"]).encode()
        path = str(request.path_params["path"])
        file_id = path.removeprefix("files/")
        self._record(Call("file", {"file_path": path}, time.monotonic(), 200))
        if not hmac.compare_digest(token, self.token.encode()) or file_id not in self.files:
            return Response(status_code=404)
        return Response(self.files[file_id], media_type="application/octet-stream")

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        size = len(self.files[file_id])
        return {"file_id": file_id, "file_unique_id": file_id, "file_size": size,
                "file_path": f"files/{file_id}"}  # fmt: skip

    async def _not_found(self, request: Request) -> JSONResponse:
        return _answer(404, error=ApiError(404, "Not Found"))

    async def _endpoint(self, request: Request) -> JSONResponse:
        at = time.monotonic()
        name = request.path_params["method"]
        method = self._canonical.get(name.lower(), name)
        token = str(request.path_params["token"]).encode()
        params: dict[str, Any] = {}
        try:
            params = await _read_params(request)
            if not hmac.compare_digest(token, self.token.encode()):
                raise ApiError(401, "Unauthorized")
            with self._cond:
                fault = self._faults.get(method)
                if fault:
                    raise fault.popleft()
            if method == "getUpdates":
                result = await self._get_updates(params)
            else:
                result = self._call(method, params)
        except ApiError as error:
            self._record(Call(method, params, at, error.status))
            return _answer(error.status, error=error)
        self._record(Call(method, params, at, 200))
        return _answer(200, result)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        handler = self._methods.get(method)
        if handler is None:
            raise ApiError(404, "Not Found")
        with self._cond:
            return handler(params)

    def _record(self, call: Call) -> None:
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def _wake(self) -> None:
        """Wake the waiting polls (the condition's lock is held)."""
        for loop, future in self._waiters:
            loop.call_soon_threadsafe(_settle, future)

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + min(float(params.get("timeout") or 0), 50.0)
        loop = asyncio.get_running_loop()
        while True:
            with self._cond:
                updates = self._take_updates(params)
                if updates or self._closing or time.monotonic() >= deadline:
                    return updates
                waiter = (loop, loop.create_future())
                self._waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter[1], deadline - time.monotonic())
            except TimeoutError:
                pass
            finally:
                with self._cond:
                    self._waiters.remove(waiter)

    def _take_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        if self._conflict:
            raise ApiError(409, CONFLICT_POLLING)
        if self.webhook is not None:
            raise ApiError(409, CONFLICT_WEBHOOK)
        if params.get("allowed_updates") is not None:
            self.allowed_updates = list(params["allowed_updates"])
        offset = int(params.get("offset") or 0)
        while offset > 0 and self._queue and self._queue[0]["update_id"] < offset:
            self._queue.popleft()
        allowed = set(self.allowed_updates or ()) or _DEFAULT_ALLOWED
        self._queue = deque(u for u in self._queue if update_kind(u) in allowed)
        limit = min(max(int(params.get("limit") or 100), 1), 100)
        return list(self._queue)[:limit]

    # -- methods with state of their own -----------------------------------------------------

    def _received_in(self, update: dict[str, Any]) -> None:
        message = update.get("message") or update.get("edited_message")
        if isinstance(message, dict) and "chat" in message and "message_id" in message:
            self.received(message)

    def _draft(self, params: dict[str, Any]) -> bool:
        if not self.drafts_supported:
            raise ApiError(404, "Not Found")
        return self.draft(params)

    def _set_commands(self, params: dict[str, Any]) -> bool:
        commands = list(params.get("commands") or [])
        for command in commands:
            name = str(command.get("command", ""))
            if not (0 < len(name) <= 32 and name.replace("_", "").isalnum() and name.islower()):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 0 < len(str(command.get("description", ""))) <= 256:
                raise ApiError(400, "Bad Request: command description is empty")
        self._commands[_command_key(params)] = commands
        return True

    def _delete_commands(self, params: dict[str, Any]) -> bool:
        self._commands.pop(_command_key(params), None)
        return True

    def _set_webhook(self, params: dict[str, Any]) -> bool:
        url = str(params.get("url") or "")
        if not url:
            return self._delete_webhook(params)
        if not url.startswith(("http://", "https://")):
            raise ApiError(400, "Bad Request: bad webhook: Failed to resolve host: Name or service")
        secret = params.get("secret_token")
        allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
        if secret is not None and not (0 < len(secret) <= 256 and set(secret) <= allowed):
            raise ApiError(400, "Bad Request: secret token contains unallowed characters")
        if params.get("drop_pending_updates"):
            self._queue.clear()
        self.webhook = dict(params)
        self._wake()
        return True

    def _delete_webhook(self, params: dict[str, Any]) -> bool:
        self.webhook = None
        if params.get("drop_pending_updates"):
            self._queue.clear()
        return True

    def _webhook_info(self, params: dict[str, Any]) -> dict[str, Any]:
        hook = self.webhook or {}
        info = {
            "url": hook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": len(self._queue),
        }
        for key in ("max_connections", "allowed_updates", "ip_address"):
            if key in hook:
                info[key] = hook[key]
        return info


_DEFAULT_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    500: "Internal Server Error",
    502: "Bad Gateway",
}


def _command_key(params: dict[str, Any]) -> tuple[str, str]:
    scope = params.get("scope") or {}
    return str(scope.get("type", "default")), str(params.get("language_code") or "")


def _shown(params: dict[str, Any]) -> dict[str, Any]:
    return {k: "<hidden>" if k == "secret_token" else v for k, v in params.items()}


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _accepts(predicate: Callable[[Call], bool], call: Call) -> bool:
    try:
        return bool(predicate(call))
    except (LookupError, TypeError):
        return False
