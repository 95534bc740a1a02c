"""The Starlette application: :func:`create_app` wires the runtime, personas, routes and middleware.

One owner: the :class:`~generic_framework.runtime.Runtime` (the GLM client, the conversation
store, the per-conversation locks, the MCP sessions). The app builds it, or borrows the one it is
given; the personas are bound to it, and ``/v1/conversations`` uses its store and locks. At
start-up (the lifespan) the runtime's client is opened, the web-search mode is logged once, and
the served personas' MCP servers are started, so a broken server shows in the start-up log
rather than in the first user's turn.

Middleware, outermost first (service/middleware.py): the client's address from a trusted
proxy's ``X-Forwarded-For`` (only with ``BOT_TRUSTED_PROXIES``; service/forwarded.py), the Host
allowlist (without
``BOT_API_TOKEN``, or whenever ``BOT_ALLOWED_HOSTS`` is set), CORS (only when
``BOT_CORS_ORIGINS`` is set), the Origin check, who is asking on ``/v1/*`` and ``/metrics``
(service/callers.py: an API key, ``BOT_API_TOKEN``, the trusted header; ``/metrics`` for
admins, open with ``BOT_METRICS_PUBLIC=true``), JSON-only state changes, the body limit
(``BOT_MAX_BODY``).
Endpoints raise; the exception handlers
(:data:`~generic_framework.service.errors.EXCEPTION_HANDLERS`) answer every error as
OpenAI-style JSON, including Starlette's own 404 and 405.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.errors import ConfigError
from generic_framework.redaction import redact_url
from generic_framework.runtime import Runtime, default_persona
from generic_framework.service.accounts import admin_key, admin_keys, admin_user, admin_users, me
from generic_framework.service.api import (
    chat_completions,
    conversation,
    delete_last_turn,
    get_model,
    get_picture,
    list_conversations,
    list_models,
    post_message,
)
from generic_framework.service.callers import Authenticator, CallerMiddleware, require_admin
from generic_framework.service.errors import EXCEPTION_HANDLERS
from generic_framework.service.forwarded import ForwardedClientMiddleware
from generic_framework.service.info import bot_info, mock_examples, recorded_examples
from generic_framework.service.memories import delete_memory, memories
from generic_framework.service.middleware import (
    PROBE_PATHS,
    BodyLimitMiddleware,
    HostAllowlistMiddleware,
    JsonOnlyMiddleware,
    OriginCheckMiddleware,
)
from generic_framework.service.openapi import openapi_document
from generic_framework.service.readiness import UpstreamProbe, check_store
from generic_framework.service.state import PersonaLike, ServiceState, state_of

if TYPE_CHECKING:
    from generic_framework.chats.platforms import Webhook, WebhookFactory

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


async def _favicon(request: Request) -> Response:
    """The page's icon where browsers ask for it unprompted (the page links the same SVG)."""
    return FileResponse(
        STATIC_DIR / "favicon.svg",
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )


async def _healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _readiness(state: ServiceState, probe: UpstreamProbe) -> dict[str, str]:
    """The checks of ``/readyz`` (service/readiness.py says what each one does)."""
    count = len(state.personas)
    return {
        "store": await check_store(state.runtime.store),
        "personas": f"ok ({count})" if count else f"fail: none in {state.runtime.personas_dir}",
        "upstream": await probe.check(),
    }


async def _readyz(request: Request) -> Response:
    """Ready when this replica can serve: its store answers and it has personas. The upstream's
    state is reported (``degraded``, and the ``upstream_reachable`` gauge) but does not take the
    replica out of a proxy's rotation: the page, the history and the API's errors still work.
    A draining replica (stopping: SIGTERM with ``BOT_DRAIN_DELAY``) is not ready, whatever its
    checks say, so the proxy sends it nothing new before it stops accepting connections."""
    state = state_of(request)
    checks = await _readiness(state, request.app.state.upstream_probe)
    upstream_ok = checks["upstream"].startswith("ok")
    state.runtime.telemetry.metrics.upstream_reachable(upstream_ok)
    ready = checks["store"].startswith("ok") and checks["personas"].startswith("ok")
    status = "ready" if ready else "not ready"
    if state.drain.draining:
        ready, status = False, "draining"
    body: dict[str, object] = {"status": status, "checks": checks}
    if not upstream_ok:
        body["degraded"] = ["upstream"]
    return JSONResponse(body, status_code=200 if ready else 503)


async def _metrics(request: Request) -> Response:
    state = state_of(request)
    if not state.settings.bot_metrics_public:
        require_admin(request)
    metrics = state.runtime.telemetry.metrics
    body, content_type = metrics.exposition(request.headers.get("accept", ""))
    return Response(body, headers={"Content-Type": content_type})


async def _openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


def _middleware(
    settings: Settings, authenticator: Authenticator, webhooks: Sequence[str] = ()
) -> list[Middleware]:
    """The middleware stack, outermost first (the module docstring says what each does);
    ``webhooks``: the chat platforms' webhook paths (a platform's secret is its auth; the
    platform names the public host)."""
    stack = []
    if settings.trusted_proxies:
        stack.append(Middleware(ForwardedClientMiddleware, trusted=settings.trusted_proxies))
    if settings.bot_api_token is None or settings.allowed_hosts:
        # A scraper names each replica by its address (Prometheus cannot set Host): with a
        # token, /metrics needs it or was made public, so no page can read it by rebinding.
        metrics = ("/metrics",) if settings.bot_api_token is not None else ()
        stack.append(
            Middleware(
                HostAllowlistMiddleware,
                allowed=settings.allowed_hosts,
                open_paths=PROBE_PATHS | set(metrics) | set(webhooks),
            )
        )
    origins = list(settings.cors_origins)
    if origins:
        stack.append(
            Middleware(
                CORSMiddleware,
                allow_origins=origins,
                allow_methods=["GET", "POST", "PATCH", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
                max_age=600,
            )
        )
    stack.append(Middleware(OriginCheckMiddleware, allowed=origins))
    protected = () if settings.bot_metrics_public else ("/metrics",)
    stack.append(Middleware(CallerMiddleware, authenticator=authenticator, also=protected))
    stack.append(Middleware(JsonOnlyMiddleware))
    stack.append(Middleware(BodyLimitMiddleware, max_body=settings.bot_max_body))
    return stack


def _routes() -> list[Route | Mount]:
    return [
        Route("/", _index, methods=["GET"]),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/readyz", _readyz, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
        Route("/openapi.json", _openapi, methods=["GET"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model}", get_model, methods=["GET"]),
        Route("/v1/bot", bot_info, methods=["GET"]),
        Route("/v1/conversations", list_conversations, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/conversations/{conversation_id}/messages", post_message, methods=["POST"]),
        # One route for both methods, so a 405 there lists both in its Allow header.
        Route(
            "/v1/conversations/{conversation_id}", conversation, methods=["GET", "PATCH", "DELETE"]
        ),
        Route(
            "/v1/conversations/{conversation_id}/pictures/{sha256}", get_picture, methods=["GET"]
        ),
        Route(
            "/v1/conversations/{conversation_id}/turns/last", delete_last_turn, methods=["DELETE"]
        ),
        Route("/v1/memories", memories, methods=["GET", "POST"]),
        Route("/v1/memories/{memory_id}", delete_memory, methods=["DELETE"]),
        Route("/v1/me", me, methods=["GET"]),
        Route("/v1/admin/users", admin_users, methods=["GET", "POST"]),
        Route("/v1/admin/users/{name}", admin_user, methods=["GET", "PATCH", "DELETE"]),
        Route("/v1/admin/keys", admin_keys, methods=["GET", "POST"]),
        Route("/v1/admin/keys/{key_id}", admin_key, methods=["DELETE"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]


def _own_runtime(
    settings: Settings, environ: Mapping[str, str] | None, *, offline: bool = False
) -> Runtime:
    """The runtime of an app given none (``offline``: on the embedded mock, its turns stored
    so); DATA_DIR is created now, so /readyz can check it."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create DATA_DIR {str(settings.data_dir)!r} ({exc}); check DATA_DIR"
        ) from exc
    return Runtime(settings, environ=environ, offline=offline)


def _served(runtime: Runtime, personas: Mapping[str, PersonaLike] | None) -> dict[str, PersonaLike]:
    """The personas to serve: the given ones, or every persona file of the runtime (at least
    one: a service with none would start and never be ready)."""
    if personas is None:
        runtime.specs(required=True)
        return dict(runtime.personas())
    for name, persona in personas.items():
        if isinstance(persona, Persona) and persona.runtime is not runtime:
            raise TypeError(
                f"persona {name!r} is bound to another runtime: its turns would be stored where "
                "/v1/conversations does not look; bind it to the app's runtime"
            )
    return dict(personas)


def _lifespan(
    state: ServiceState, webhooks: Sequence[Webhook] = ()
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """At start-up open the store (applying its migrations, once across replicas), the runtime's
    client (off the event loop, not on the first request), its personas' MCP servers and the
    chat platforms' webhooks (registered with each platform); at shutdown finish the updates
    under way (``BOT_SHUTDOWN_TIMEOUT``) and close the runtime if the app built it (a borrowed one
    stays open)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            await state.runtime.store.open()
            await state.runtime.open()
            served = [p for p in state.personas.values() if isinstance(p, Persona)]
            if any(persona.spec.mcp_servers for persona in served):
                await state.runtime.discover(served)
            for webhook in webhooks:
                await webhook.start()
            try:
                yield
            finally:
                for webhook in webhooks:
                    await webhook.stop(state.settings.bot_shutdown_timeout)
        finally:
            if state.owns_runtime:
                await state.runtime.aclose()

    return lifespan


def _the_runtime(
    settings: Settings | None,
    runtime: Runtime | None,
    environ: Mapping[str, str] | None,
    *,
    offline: bool = False,
) -> Runtime:
    """The given runtime, or one the app builds (from the environment without settings)."""
    if runtime is not None:
        if settings is not None and settings is not runtime.settings:
            raise TypeError("pass settings or runtime, not both (the runtime has its settings)")
        return runtime
    if settings is None:
        settings, environ = Settings(), os.environ if environ is None else environ
    return _own_runtime(settings, environ, offline=offline)


def _state(
    runtime: Runtime, personas: dict[str, PersonaLike], *, owns: bool, offline: bool
) -> ServiceState:
    """The app's shared state; warns when calls would go upstream without a key."""
    if not runtime.settings.has_api_key:
        url = redact_url(runtime.settings.base_url)
        logger.warning("OPENAI_API_KEY is not set: calls go to %s without a key", url)
    first = default_persona(runtime.settings, personas)
    names = sorted(personas)
    examples = recorded_examples(runtime.settings, names) if offline else {}
    if not offline:
        learnt = mock_examples(runtime.settings, names)  # a mock Z.AI server upstream?
        if learnt is not None:
            offline, examples = True, learnt
    return ServiceState(
        runtime=runtime,
        personas=personas,
        owns_runtime=owns,
        offline=offline,
        default_persona=first,
        examples=examples,
    )


def _starlette(state: ServiceState, webhooks: Sequence[Webhook]) -> Starlette:
    """The app's routes (the chat platforms' webhooks first), middleware, handlers and
    lifespan."""
    routes = _routes()
    for webhook in webhooks:
        routes.insert(0, Route(webhook.path, webhook.endpoint, methods=["POST"]))
    authenticator = Authenticator(state.settings, state.runtime.store)
    return Starlette(
        routes=routes,
        middleware=_middleware(state.settings, authenticator, [w.path for w in webhooks]),
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=_lifespan(state, webhooks),
    )


def create_app(
    settings: Settings | None = None,
    *,
    runtime: Runtime | None = None,
    personas: Mapping[str, PersonaLike] | None = None,
    upstream_probe: UpstreamProbe | None = None,
    environ: Mapping[str, str] | None = None,
    offline: bool = False,
    webhooks: Sequence[WebhookFactory] = (),
) -> Starlette:
    """Build the bot service over one :class:`~generic_framework.runtime.Runtime`.

    Args:
        settings: the configuration of a runtime the app builds (``Settings()``, from the
            environment, when omitted); not with ``runtime`` (it has its settings).
        runtime: a runtime to borrow (never closed here). Without one the app builds
            ``Runtime(settings)`` and closes it at shutdown (in the lifespan).
        personas: name -> persona to serve; every persona file of the runtime when omitted
            (read now, so a bad file fails here, before a port is bound). Turns are stored in
            ``runtime.store`` and serialised by ``runtime.locks``, which
            ``/v1/conversations`` reads and takes too: a given
            :class:`~generic_framework.core.persona.Persona` must be bound to that runtime.
        upstream_probe: the upstream check of ``/readyz``; one over the runtime's settings
            when omitted (tests pass one whose ``connect`` is a fake).
        environ: the ``${VAR}`` values of persona files' MCP servers for a runtime the app
            builds; ``os.environ`` when ``settings`` is omitted too (the app then reads the
            environment anyway), none otherwise.
        offline: the upstream is the embedded mock (``serve`` without a key): ``GET /v1/bot``
            says so and lists its recorded questions, and a runtime the app builds stores its
            turns as offline (a borrowed runtime's own ``offline`` decides that).
        webhooks: the chat platforms' webhooks (chats/platforms.py's ``webhook_factories``),
            each built over the app's runtime and mounted at its path.

    Raises:
        ConfigError: a persona file or setting is invalid (``BOT_DEFAULT_PERSONA`` naming no
            persona too), there is no persona file to serve, or DATA_DIR cannot be created.
        TypeError: ``settings`` differ from the runtime's, or a persona is bound to another
            runtime.
    """
    owns = runtime is None
    runtime = _the_runtime(settings, runtime, environ, offline=offline)
    state = _state(runtime, _served(runtime, personas), owns=owns, offline=offline)
    app = _starlette(state, [build(runtime, state.offline) for build in webhooks])
    # No redirect from "/v1/conversations/0%2F" to ".../0": a 307 that keeps the method would
    # send a DELETE to another conversation than the one named. Unknown paths are a JSON 404.
    app.router.redirect_slashes = False
    app.state.service = state
    app.state.upstream_probe = upstream_probe or UpstreamProbe(state.settings)
    return app
