"""``Idempotency-Key`` on the turn endpoints: a retried request gets the first one's answer.

A client that lost an answer (a timeout, a dropped connection, a 503 from a proxy while a
replica was replaced) retries with the same key; the turn then runs once. Per caller
(:func:`~generic_framework.service.callers.caller_id`: the signed-in user, and the key used)
and key, as a claim of the store so every replica sees it (:mod:`~generic_framework.store.keys`,
docs/design/0608). The store keeps the claim opaque: the header's key, the request's
:func:`fingerprint` (the claim's tag) and the answer kept (its value: :func:`kept`, read back by
:func:`answer_of`) are this module's.

- **New key**: claimed, and the request runs under a lease that a background task renews.
  A completed answer is kept for a day (:data:`~generic_framework.store.keys.KEEP_SECONDS`):
  the JSON body, or for a streamed request every frame of the stream (keep-alive comments
  left out). A turn that failed, or whose stream the client left, stored nothing: the key is
  released, and a retry runs the turn again.
- **Same key, same request, answered before**: the kept answer, with its status and type (a
  stream replayed as one stream of the same frames) and ``Idempotent-Replayed: true``.
- **Same key, its turn stored but its answer not kept** (the replica died, or the store
  failed, between storing the turn and keeping the answer): the stored turn settled the claim
  in its own transaction (:attr:`~generic_framework.core.options.TurnOptions.settles`), so the
  retry is answered from the stored turn (``Idempotent-Replayed: true``), whatever the lease:
  the turn does not run again.
- **Same key, still running** (on any replica): 409 ``idempotency_key_in_use`` with
  ``Retry-After``. A replica that dies mid-turn stops renewing; once its lease lapses
  (:data:`~generic_framework.store.keys.LEASE_SECONDS`) the next retry takes the key over.
- **Same key, another request body**: 422 ``idempotency_key_reused`` (the IETF draft "The
  Idempotency-Key HTTP Header Field" and Stripe answer so); a malformed key is a 400.

The request is validated before the key is claimed: a refused body claims nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from generic_framework.core.reply import Reply
from generic_framework.errors import StoreUnavailableError
from generic_framework.service.callers import caller_id
from generic_framework.service.errors import ServiceError
from generic_framework.service.mapping import stored_reply
from generic_framework.service.state import state_of
from generic_framework.service.streaming import DONE, KEEPALIVE, SSE_HEADERS, TurnStream
from generic_framework.store.keys import (
    KEEP_SECONDS,
    LEASE_SECONDS,
    Claim,
    ClaimRef,
    ClaimStore,
    settled_turn,
)

__all__ = [
    "HEADER",
    "KEY_MAX",
    "REPLAYED_HEADER",
    "RETRY_AFTER_MAX",
    "answer_of",
    "check_key",
    "fingerprint",
    "idempotent",
    "kept",
    "request_key",
]

logger = logging.getLogger("generic_framework.service")

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
RETRY_AFTER_MAX = 5
"""The longest ``Retry-After`` of a 409: a running turn usually ends sooner than its lease."""
KEY_MAX = 255
"""The longest key accepted (Stripe's limit too)."""


def check_key(value: str) -> str:
    """The key of an ``Idempotency-Key`` header: 1-:data:`KEY_MAX` visible ASCII characters,
    the quotes of a structured-field string (``"abc"``, as the IETF draft writes it) removed.

    Raises:
        ValueError: empty, too long, or with other characters.
    """
    key = value.strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= KEY_MAX or not all("!" <= ch <= "~" for ch in key):
        raise ValueError(
            f"the Idempotency-Key header must be 1-{KEY_MAX} visible ASCII characters (e.g. a UUID)"
        )
    return key


def fingerprint(method: str, path: str, body: bytes) -> str:
    """A SHA-256 over the request: method, path and the JSON body in canonical form (key order
    and spacing do not count); a body that is not JSON counts byte for byte."""
    try:
        canonical = json.dumps(
            json.loads(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
    except ValueError:
        canonical = body
    digest = hashlib.sha256(f"{method} {path}\n".encode())
    digest.update(canonical)
    return digest.hexdigest()


def kept(status: int, content_type: str, body: bytes) -> bytes:
    """What the store keeps of an answer (a claim's opaque value): ``<status> <type>``, a
    newline, then the body."""
    return f"{status} {content_type}\n".encode() + body


def answer_of(value: bytes) -> tuple[int, str, bytes]:
    """The status, content type and body of a kept answer (see :func:`kept`); a value kept
    before answers carried their status is its body alone (a stream's frames, or JSON)."""
    head, _, body = value.partition(b"\n")
    status, _, content_type = head.decode(errors="replace").partition(" ")
    if not (status.isdigit() and "/" in content_type):
        stream = value.startswith(b"data: ")
        return 200, "text/event-stream" if stream else "application/json", value
    return int(status), content_type, body


def request_key(request: Request) -> str | None:
    """The request's idempotency key, or None without the header.

    Raises:
        ServiceError: 400 ``invalid_idempotency_key`` for a malformed key.
    """
    raw = request.headers.get(HEADER)
    if raw is None:
        return None
    try:
        return check_key(raw)
    except ValueError as exc:
        raise ServiceError(400, str(exc), param=HEADER, code="invalid_idempotency_key") from None


_RELEASING: set[asyncio.Future[None]] = set()
"""Releases left to the background (:meth:`_Lease.release_later`), kept until they end."""


class _Lease:
    """A claimed key while its request runs: renewed in the background until it is finished
    or released (once). A store failure here is logged, never raised: the answer still goes
    out, and a key that could not be written ends with its lease."""

    def __init__(self, store: ClaimStore, caller: str, key: str, token: str) -> None:
        self.store = store
        self.caller = caller
        self.key = key
        self.token = token
        self.ended = False
        self._renewal = asyncio.create_task(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            try:
                if not await self.store.renew_key(
                    self.caller, self.key, self.token, lease=LEASE_SECONDS
                ):
                    logger.warning("an idempotency key's lease was lost to another request")
                    return
            except Exception as exc:  # the store is down: try again at the next beat
                logger.warning("could not renew an idempotency key's lease: %s", exc)

    def _end(self) -> bool:
        if self.ended:
            return False
        self.ended = True
        self._renewal.cancel()
        return True

    async def finish(self, status: int, content_type: str, body: bytes) -> None:
        """Keep the answer for retries."""
        if not self._end():
            return
        try:
            finished = await self.store.finish_key(
                self.caller, self.key, self.token, kept(status, content_type, body)
            )
        except Exception as exc:
            logger.warning("could not keep the answer of an idempotency key: %s", exc)
            return
        if not finished:
            logger.warning("an idempotency key was taken over before its answer was kept")

    async def release(self) -> None:
        """Forget the key (the request stored nothing; a key its stored turn settled stays)."""
        if self._end():
            await asyncio.shield(self._forget())

    def release_later(self) -> None:
        """:meth:`release` in the background: the store just failed the request, and on a
        server that hangs the release would hold the 503 for another bound. Until it lands a
        retry gets 409 with ``Retry-After``."""
        if self._end():
            task = asyncio.ensure_future(self._forget())
            _RELEASING.add(task)
            task.add_done_callback(_RELEASING.discard)

    async def _forget(self) -> None:
        with contextlib.suppress(Exception):
            await self.store.release_key(self.caller, self.key, self.token)


class _RecordedStream(Response):
    """A :class:`TurnStream` whose frames are kept once it ends with ``[DONE]``."""

    def __init__(self, inner: TurnStream, lease: _Lease) -> None:
        self.inner = inner
        self.lease = lease
        self.status_code = inner.status_code
        self.background = None
        self.raw_headers = inner.raw_headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        frames: list[bytes] = []

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.body" and message["body"] != KEEPALIVE:
                frames.append(message["body"])
            await send(message)

        try:
            await self.inner(scope, receive, recording)
        except BaseException:
            await self.lease.release()
            raise
        body = b"".join(frames)
        if body.endswith(DONE):
            await self.lease.finish(200, self.inner.media_type, body)
        else:  # an error frame, or the client left: the turn stored nothing
            await self.lease.release()


def _replayed(claim: Claim) -> Response:
    status, content_type, body = answer_of(claim.value)
    headers = {REPLAYED_HEADER: "true"}
    if content_type.startswith("text/event-stream"):
        headers.update(SSE_HEADERS)
    return Response(body, status_code=status, media_type=content_type, headers=headers)


def _refusal(claim: Claim) -> ServiceError:
    if claim.outcome == "mismatch":
        return ServiceError(
            422,
            "this Idempotency-Key was already used with a different request; "
            "send a new key with a new request",
            param=HEADER,
            code="idempotency_key_reused",
        )
    wait = max(1, min(RETRY_AFTER_MAX, math.ceil(claim.retry_after)))
    return ServiceError(
        409,
        "a request with this Idempotency-Key is still running; retry it after the first "
        "one ends to get its answer",
        param=HEADER,
        code="idempotency_key_in_use",
        headers={"Retry-After": str(wait)},
    )


async def _from_stored_turn(
    request: Request, claim: Claim, answer: Callable[[Reply], Response]
) -> Response:
    """The answer of the stored turn that settled ``claim``, replayed."""
    conversation_id, number = settled_turn(claim.value)
    turns = await state_of(request).runtime.conversations.turns(conversation_id) or []
    turn = next((t for t in turns if t.turn == number), None)
    if turn is None:
        raise ServiceError(
            404,
            "the turn of this Idempotency-Key was stored, but its conversation was deleted since",
            code="conversation_not_found",
        )
    response = answer(stored_reply(turn, conversation_id))
    response.headers[REPLAYED_HEADER] = "true"
    return response


async def idempotent(
    request: Request,
    run: Callable[[ClaimRef | None], Awaitable[Response]],
    answer: Callable[[Reply], Response],
) -> Response:
    """``run(claim)``'s response, once per caller and ``Idempotency-Key`` (see the module).

    Call it after the request was validated; without the header it is ``run(None)``.
    ``run`` stores its turn settling ``claim`` (:meth:`Ask.settling
    <generic_framework.turns.Ask.settling>`); ``answer`` is the response ``run`` gives for a
    reply, used for a retry whose turn was stored but whose answer was not kept.

    Raises:
        ServiceError: 400 (malformed key), 409 (running), 422 (another request body), 404
            (the stored turn's conversation was deleted since).
    """
    key = request_key(request)
    if key is None:
        return await run(None)
    store = state_of(request).runtime.claims
    caller = caller_id(request)
    mark = fingerprint(request.method, request.url.path, await request.body())
    claim = await store.claim_key(caller, key, mark, lease=LEASE_SECONDS, keep=KEEP_SECONDS)
    if claim.outcome == "done":
        return _replayed(claim)
    if claim.outcome == "stored":
        return await _from_stored_turn(request, claim, answer)
    if claim.outcome != "run":
        raise _refusal(claim)
    lease = _Lease(store, caller, key, claim.token)
    try:
        response = await run(ClaimRef(caller, key, claim.token))
    except StoreUnavailableError:
        lease.release_later()
        raise
    except BaseException:
        await lease.release()
        raise
    if isinstance(response, TurnStream):
        return _RecordedStream(response, lease)
    content_type = response.headers.get("content-type", "application/json")
    await lease.finish(response.status_code, content_type, bytes(response.body))
    return response
