"""Print the path of one ``//`` turn through generic_framework: the functions, in first-call order.

Runs a turn offline against the embedded mock and records every function of the package that
the turn calls (first call only, this thread: the mock's own thread is not traced)::

    python scripts/turn_path.py cli       # generic-framework chat "// ..." (one-shot)
    python scripts/turn_path.py service   # POST /v1/chat/completions with a conversation_id
    python scripts/turn_path.py cli --modules   # the modules crossed, in order

docs/design/0317 is written from its output.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

QUESTION = "// what's the weather in Nanaimo?"
PERSONAS = Path(__file__).resolve().parents[1] / "personas"


class CallOrder:
    """The package's functions a traced block calls, in first-call order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._seen: set[tuple[str, str]] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_qualname
        if module.startswith("generic_framework") and "<" not in name:
            key = (module.removeprefix("generic_framework."), name)
            if key not in self._seen:
                self._seen.add(key)
                self.calls.append(key)


def cli_turn(path: CallOrder) -> None:
    """The one-shot CLI, from ``Persona._run_turn`` on (the command's start-up is not traced)."""
    from generic_framework.cli import main

    for name in ("OPENAI_API_KEY", "ZAI_API_KEY"):
        os.environ.pop(name, None)
    os.environ["DATA_DIR"] = tempfile.mkdtemp()
    os.environ["PERSONAS_DIR"] = str(PERSONAS)
    sys.argv = ["generic-framework", "chat", QUESTION]
    sys.setprofile(path)
    try:
        main()
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    start = next(i for i, (_, name) in enumerate(path.calls) if name.endswith("_run_turn"))
    path.calls[:] = path.calls[start:]


async def service_turn(path: CallOrder) -> None:
    """One non-streamed request to the service, in process, over a SQLite conversation."""
    import httpx

    from generic_framework.config import Settings
    from generic_framework.mock.server import MockServer
    from generic_framework.runtime import Runtime
    from generic_framework.service.app import create_app

    body = {
        "model": "scout",
        "conversation_id": "c1",
        "messages": [{"role": "user", "content": QUESTION}],
    }
    with MockServer() as mock:
        settings = Settings.defaults(
            api_key="test-key",
            base_url=mock.base_url,
            data_dir=tempfile.mkdtemp(),
            personas_dir=PERSONAS,
        )
        async with Runtime(settings) as runtime:
            app = create_app(runtime=runtime)
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(transport=transport, base_url="http://localhost") as client,
                app.router.lifespan_context(app),
            ):
                sys.setprofile(path)
                try:
                    response = await client.post("/v1/chat/completions", json=body)
                finally:
                    sys.setprofile(None)
                response.raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entry", choices=["cli", "service"])
    parser.add_argument("--modules", action="store_true", help="only the modules, in order")
    options = parser.parse_args()
    path = CallOrder()
    if options.entry == "cli":
        cli_turn(path)
    else:
        asyncio.run(service_turn(path))
    if options.modules:
        modules = list(dict.fromkeys(module for module, _ in path.calls))
        print(f"{len(modules)} modules, {len(path.calls)} functions")
        print(" -> ".join(modules))
    else:
        for module, name in path.calls:
            print(f"{module}  {name}")


if __name__ == "__main__":
    main()
