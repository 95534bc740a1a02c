"""The bot HTTP service: an OpenAI-compatible API over the personas, and a web chat page.

``generic-framework serve`` calls :func:`run`; tests and embedders call :func:`create_app` and
serve it themselves (``uvicorn_config`` gives the service's timeouts and limits).
"""

from __future__ import annotations

from generic_framework.service.app import create_app
from generic_framework.service.server import check_bind, is_loopback, run, uvicorn_config

__all__ = ["check_bind", "create_app", "is_loopback", "run", "uvicorn_config"]
