"""The bot HTTP service: an OpenAI-compatible API over the personas, and a web chat page.

``generic-framework serve`` calls :func:`run`; tests and embedders call :func:`create_app` (over
their own :class:`~generic_framework.runtime.Runtime`, or one the app builds and closes) and
serve it themselves (``uvicorn_config`` gives the service's timeouts and limits).

Modules: ``app`` (the factory, routes, lifespan), ``api`` (the ``/v1`` endpoints), ``state``
(what endpoints share), ``requests`` (reading and checking requests), ``mapping`` (replies and
stored messages to response bodies), ``streaming`` (SSE), ``errors`` (the error mapping and the
exception handlers), ``middleware``, ``schemas``, ``openapi`` and ``server`` (uvicorn).
"""

from __future__ import annotations

from generic_framework.service.app import create_app
from generic_framework.service.server import check_bind, is_loopback, run, uvicorn_config

__all__ = ["check_bind", "create_app", "is_loopback", "run", "uvicorn_config"]
