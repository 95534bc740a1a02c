"""The servers of scenario 8: ``python -m benchmarks.proxies KIND --upstream URL``.

KIND is one of:

- ``service``: generic_framework's bot service as it ships (``create_app`` served with
  ``uvicorn_config``), one persona without tools, its store in a temporary directory.
- ``floor``: the least a proxy can do: a bare Starlette route that forwards the request body to
  the upstream's ``/chat/completions`` through one pooled ``httpx.AsyncClient`` whose pool holds
  a connection for every concurrent client (256), and hands the answer back, streamed or whole.
- ``floor-default``: the same route on httpx's default pool (100 connections, 20 kept alive),
  what a proxy written without tuning gets.
- ``floor-sharded``: the same route on the transport the library's client uses (256
  connections in httpcore pools of 16, ``generic_framework.wire.pool``): what is left of the
  service's cost once both sides have the same connection pool.
- ``litellm``: LiteLLM's proxy server (run from the peers' environment, ``.venv-bench``), with
  one model ``bench`` pointing at the upstream.

Each listens on 127.0.0.1, prints ``PORT <n>`` once its socket accepts connections, and stops
when its standard input closes. Access logs are off for all three, so no row pays for writing
them. Only the standard library is imported at the top: each kind imports its own framework.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

MASTER_KEY = "sk-bench-" + "0123456789abcdef" * 2
"""The bearer token of every request: LiteLLM's proxy checks it, the others ignore it."""

PERSONA = """name = "bench"
description = "The benchmark's persona: no tools, no web search."
system_prompt = "You are a terse assistant."

[web_search]
mode = "off"
"""


def floor_app(upstream: str, pool: str = "sized") -> Any:
    """A bare Starlette route forwarding the body through one pooled httpx client.

    ``pool``: ``sized``, 256 connections, all kept alive (the load's 200 clients never wait
    for one); ``default``, httpx's default pool; ``sharded``, the library's transport.
    """
    import contextlib

    import httpx
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    if pool == "sharded":
        from generic_framework.wire.pool import ShardedTransport

        client = httpx.AsyncClient(timeout=60.0, transport=ShardedTransport(256))
    else:
        sized = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        limits = sized if pool == "sized" else httpx.Limits()
        client = httpx.AsyncClient(timeout=60.0, limits=limits)
    url = f"{upstream}/chat/completions"
    headers = {"authorization": "Bearer bench-key", "content-type": "application/json"}

    async def chat(request: Request) -> Response:
        body = await request.body()
        if json.loads(body).get("stream"):
            upstream_request = client.build_request("POST", url, content=body, headers=headers)
            answer = await client.send(upstream_request, stream=True)
            return StreamingResponse(
                answer.aiter_raw(),
                status_code=answer.status_code,
                media_type=answer.headers.get("content-type"),
                background=BackgroundTask(answer.aclose),
            )
        answer = await client.post(url, content=body, headers=headers)
        return Response(answer.content, answer.status_code, media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        yield
        await client.aclose()

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"])], lifespan=lifespan
    )


def service_config(upstream: str, sock_port: int) -> Any:
    """The bot service as it ships, on a persona directory of its own."""
    from generic_framework.config import Settings
    from generic_framework.service import create_app, uvicorn_config

    home = Path(tempfile.mkdtemp(prefix="bench-service-"))
    (home / "personas").mkdir()
    (home / "personas" / "bench.toml").write_text(PERSONA, encoding="utf-8")
    settings = Settings.defaults(
        api_key="bench-key",
        base_url=upstream,
        personas_dir=home / "personas",
        data_dir=home / "data",
        log_level="WARNING",
    )
    app = create_app(settings)
    return uvicorn_config(app, settings, "127.0.0.1", sock_port, access_log=False)


def litellm_app(upstream: str) -> Any:
    """LiteLLM's proxy app with one model, ``bench``, on the upstream (no database)."""
    config = {
        "model_list": [
            {
                "model_name": "bench",
                "litellm_params": {
                    "model": "openai/glm-4.7",
                    "api_base": upstream,
                    "api_key": "bench-key",
                },
            }
        ],
        "litellm_settings": {"telemetry": False, "drop_params": True},
        # LiteLLM refuses to start without one; the load generator sends it to every server.
        "general_settings": {"master_key": MASTER_KEY},
    }
    # JSON is YAML; LiteLLM goes by the file name's extension.
    path = Path(tempfile.mkdtemp(prefix="bench-litellm-")) / "config.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    os.environ.update(
        CONFIG_FILE_PATH=str(path),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        LITELLM_LOG="ERROR",
        LITELLM_MASTER_KEY=MASTER_KEY,
    )
    from litellm.proxy.proxy_server import app

    return app


def build(kind: str, upstream: str, port: int) -> Any:
    """The uvicorn configuration of ``kind``."""
    import uvicorn

    if kind == "service":
        return service_config(upstream, port)
    if kind.startswith("floor"):
        app = floor_app(upstream, kind.partition("-")[2] or "sized")
    else:
        app = litellm_app(upstream)
    return uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def serve(kind: str, upstream: str) -> None:
    """Bind, print the port, serve until standard input closes."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4096)
    port = sock.getsockname()[1]
    server = uvicorn.Server(build(kind, upstream, port))
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()

    def stop() -> None:
        if not os.read(fd, 64):
            server.should_exit = True

    loop.add_reader(fd, stop)
    print(f"PORT {port}", flush=True)  # connections wait in the backlog until uvicorn accepts
    await server.serve(sockets=[sock])


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = ("floor", "floor-default", "floor-sharded", "service", "litellm")
    parser.add_argument("kind", choices=kinds)
    parser.add_argument("--upstream", required=True, help="base URL (…/v4) of the upstream")
    args = parser.parse_args()
    # Every scratch file of the server (the service's store, LiteLLM's config) goes in here,
    # removed when the server stops.
    with tempfile.TemporaryDirectory(prefix="bench-server-") as scratch:
        tempfile.tempdir = scratch
        asyncio.run(serve(args.kind, args.upstream))


if __name__ == "__main__":
    main()
