"""The Starlette application: :func:`create_app` wires personas, store, routes and middleware.

Middleware, outermost first: CORS (only when ``BOT_CORS_ORIGINS`` is set), bearer auth on
``/v1/*`` (only when ``BOT_API_TOKEN`` is set), the body limit (``BOT_MAX_BODY``). Every error
leaves as OpenAI-style JSON, including Starlette's own 404 and 405.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from generic_framework.config import DEFAULT_BASE_URL, Settings
from generic_framework.core.history import ConversationStore
from generic_framework.service import api
from generic_framework.service.errors import ServiceError, error_response, exception_response
from generic_framework.service.middleware import BearerAuthMiddleware, BodyLimitMiddleware
from generic_framework.service.openapi import openapi_document
from generic_framework.service.state import ServiceState, state_of
from generic_framework.service.turns import PersonaLike
from generic_framework.wire.client import GLMClient
from generic_framework.wire.errors import register_secret

__all__ = ["STATIC_DIR", "create_app"]

logger = logging.getLogger("generic_framework.service")

STATIC_DIR = Path(__file__).parent / "static"
"""The web page's files (plain HTML, JS and CSS; no build step)."""

_PAGE_HEADERS = {
    # The page loads only its own script and style; answers are inserted as text, never HTML.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


async def _index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers=_PAGE_HEADERS)


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


def _readiness(state: ServiceState) -> dict[str, str]:
    s = state.settings
    checks: dict[str, str] = {}
    data_dir = s.data_dir
    writable = data_dir.is_dir() and os.access(data_dir, os.W_OK | os.X_OK)
    checks["store"] = "ok" if writable else f"fail: DATA_DIR {data_dir} is not writable"
    checks["personas"] = (
        f"ok ({len(state.personas)})" if state.personas else f"fail: none in {s.personas_dir}"
    )
    if s.has_api_key:
        checks["upstream"] = "ok"
    elif s.base_url != DEFAULT_BASE_URL and "api.z.ai" not in s.base_url:
        checks["upstream"] = f"ok (no key; {s.base_url} is taken for a mock)"
    else:
        checks["upstream"] = "fail: OPENAI_API_KEY is not set"
    return checks


async def _readyz(request: Request) -> Response:
    checks = _readiness(state_of(request))
    ready = all(v.startswith("ok") for v in checks.values())
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return JSONResponse(body, status_code=200 if ready else 503)


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


async def _service_error(request: Request, exc: Exception) -> Response:
    return exception_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, str(exc.detail), code=code, headers=headers)


def _middleware(settings: Settings) -> list[Middleware]:
    stack = []
    origins = [o.strip() for o in settings.bot_cors_origins.split(",") if o.strip()]
    if origins:
        stack.append(
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type"],
                max_age=600,
            )
        )
    if settings.bot_api_token is not None:
        token = settings.bot_api_token.get_secret_value()
        register_secret(token)
        stack.append(Middleware(BearerAuthMiddleware, token=token))
    stack.append(Middleware(BodyLimitMiddleware, max_body=settings.bot_max_body))
    return stack


async def _conversation(request: Request) -> Response:
    if request.method == "DELETE":
        return await api.delete_conversation(request)
    return await api.get_conversation(request)


def _routes() -> list[Route | Mount]:
    return [
        Route("/", _index, methods=["GET"]),
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/readyz", _readyz, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/v1/models", api.list_models, methods=["GET"]),
        Route("/v1/chat/completions", api.chat_completions, methods=["POST"]),
        Route("/v1/conversations/{conversation_id}/messages", api.post_message, methods=["POST"]),
        # One route for both methods, so a 405 there lists both in its Allow header.
        Route("/v1/conversations/{conversation_id}", _conversation, methods=["GET", "DELETE"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]


def _build_state(
    settings: Settings,
    personas: Mapping[str, PersonaLike] | None,
    store: ConversationStore | None,
    client: GLMClient | None,
) -> ServiceState:
    """Open what was not given: one GLM client and one store shared by every persona."""
    closers: list[Any] = []
    if store is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        opened = ConversationStore(settings.database_path)
        store = opened
        closers.append(opened.aclose)
    if personas is None:
        from generic_framework.core.loader import load_personas

        if client is None:
            # One client for every persona: one connection pool and one LLM_MAX_CONCURRENCY
            # semaphore for the whole process, so excess calls queue instead of failing (1302).
            client = GLMClient(settings)
            closers.insert(0, client.aclose)
        personas = load_personas(
            settings.personas_dir, settings=settings, client=client, store=store
        )
    if not settings.has_api_key:
        logger.warning("OPENAI_API_KEY is not set: calls go to %s without a key", settings.base_url)
    return ServiceState(settings=settings, personas=dict(personas), store=store, closers=closers)


def _lifespan(state: ServiceState) -> Any:
    """At shutdown, close what the service opened (the GLM client, then the store)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for close in state.closers:
                result = close()
                if inspect.isawaitable(result):
                    await result

    return lifespan


def create_app(
    settings: Settings | None = None,
    *,
    personas: Mapping[str, PersonaLike] | None = None,
    store: ConversationStore | None = None,
    client: GLMClient | None = None,
) -> Starlette:
    """Build the bot service.

    Args:
        settings: the configuration (``Settings()`` from the environment when omitted).
        personas: name -> persona to serve; loaded from ``PERSONAS_DIR`` when omitted, all
            sharing one :class:`~generic_framework.wire.client.GLMClient` and one store.
        store: the conversation store behind ``/v1/conversations`` (pass the one the given
            personas use); opened at ``DATA_DIR/conversations.sqlite3`` when omitted.
        client: the GLM client for loaded personas (created, and closed at shutdown, when
            omitted).

    Raises:
        ConfigError: a persona file or setting is invalid.
    """
    settings = settings if settings is not None else Settings()
    state = _build_state(settings, personas, store, client)
    app = Starlette(
        routes=_routes(),
        middleware=_middleware(settings),
        exception_handlers={
            ServiceError: _service_error,
            HTTPException: _http_error,
            Exception: _service_error,
        },
        lifespan=_lifespan(state),
    )
    app.state.service = state
    return app
