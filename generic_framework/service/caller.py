"""Who is calling: the one place the service derives a caller's identity.

The identity is a stable pseudonym, never the credential itself: what the service keeps per
caller (idempotency keys) is filed under it, so a database dump shows no token. Today the
service knows one credential, ``BOT_API_TOKEN`` (checked by
:class:`~generic_framework.service.middleware.BearerAuthMiddleware` before any endpoint runs),
so every holder of the token is one caller; without a token (loopback only) a request's bearer
value, if any, still separates clients that send different ones, and no header at all is the
caller ``anonymous``. A scheme with several credentials replaces :func:`caller_id` alone.
"""

from __future__ import annotations

import hashlib

from starlette.requests import Request

__all__ = ["ANONYMOUS", "caller_id"]

ANONYMOUS = "anonymous"
"""The caller of a request without ``Authorization``."""


def caller_id(request: Request) -> str:
    """``bearer:`` and 32 hex digits of a SHA-256 over the request's credential, or
    :data:`ANONYMOUS`."""
    header = request.headers.get("authorization")
    if header is None:
        return ANONYMOUS
    scheme, _, value = header.partition(" ")
    credential = value.strip() if scheme.lower() == "bearer" else header
    digest = hashlib.sha256(b"generic_framework:caller\n" + credential.encode("utf-8", "replace"))
    return "bearer:" + digest.hexdigest()[:32]
