"""Imports inside functions are the measured exceptions of docs/design/0704, and only those.

A deferred import makes a module's dependencies harder to see; one stays only where it saves
start-up on a path someone runs, or where the dependency is optional. Each entry below is a row
of 0704's table (what it saves is measured there); a new one needs its measurement first.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "generic_framework"

ALLOWED: dict[str, set[str]] = {
    # The CLI: --help and each command load only what that command needs.
    "cli/__init__.py": {
        "generic_framework",  # limits, when an option is checked (74 ms of pydantic)
        "generic_framework.cli.chat",
        "generic_framework.cli.common",  # a usage error or a bug only
        "generic_framework.cli.db",
        "generic_framework.cli.db_backup",
        "generic_framework.cli.fixtures",
        "generic_framework.cli.mock",
        "generic_framework.cli.personas",
        "generic_framework.cli.serve",
        "generic_framework.cli.telegram",
        "generic_framework.cli.discord",
        "generic_framework.cli.usage",
    },
    "cli/accounts.py": {
        "generic_framework.cli.users",
        "generic_framework.store.users",  # the limits of users add and keys create
    },
    "cli/memory_commands.py": {"generic_framework.cli.memories"},  # the store, as accounts
    "cli/common.py": {"generic_framework.runtime"},
    # prometheus-client's HTTP server: only with TELEGRAM_METRICS_PORT (as telemetry/metrics.py).
    "cli/chat_bots.py": {"prometheus_client"},  # commands without a Runtime
    "cli/fixtures.py": {
        "generic_framework.recording.recorder",
        "generic_framework.recording.replay",
    },
    "cli/offline.py": {  # a chat with an API key
        "generic_framework.mock",
        "generic_framework.mock.fixture",
    },
    "cli/output.py": {"rich.console", "rich.markdown"},  # output that is not a terminal
    # The library: loaded when first used.
    "config.py": {"dotenv", "difflib"},  # difflib: a misspelt keyword's suggestion only
    # JSON Schema checks: only for turns that ask for a json_schema answer (55-79 ms).
    "core/options.py": {"jsonschema", "jsonschema.exceptions", "jsonschema.validators"},
    # The upstream budget shared on PostgreSQL: only with a postgresql:// DATABASE_URL; the
    # MCP sessions: only for a persona with MCP servers or search in mcp mode. The wire client
    # (and httpx): when the first client is made, not by the public import.
    "core/resources.py": {
        "generic_framework.mcp_tools.sessions",
        "generic_framework.store.postgres_slots",
        "generic_framework.wire.client",
    },
    # A turn without a conversation or a caller loads no store module.
    "core/persona.py": {"generic_framework.store.users"},
    "core/turn.py": {"generic_framework.store.base"},
    # A persona without memory loads neither its tools nor the memory store's module; a turn
    # without pictures not the store's picture type.
    "core/turn_plans.py": {"generic_framework.memory.tools"},
    "pictures/content.py": {"generic_framework.store.pictures"},
    # The persona files' reader; the edges' turn service, for the edges that ask for it.
    "runtime.py": {"generic_framework.core.loader", "generic_framework.turns"},
    "service/info.py": {"generic_framework.mock"},
    # python-telegram-bot: only for a service that receives a Telegram bot's webhook.
    "chats/telegram/platform.py": {"generic_framework.chats.telegram.webhook"},
    "service/sole.py": {"fcntl"},  # POSIX only: elsewhere no lock file, as before
    "mock/server.py": {"generic_framework.telemetry.logs"},  # only when serving
    "service/errors.py": {"generic_framework.mock.catalog"},  # an unrecorded question only
    "tools/__init__.py": {"generic_framework.tools"},  # the example tools
    "wire/retry.py": {"tenacity"},
    "telemetry/metrics.py": {
        "prometheus_client",
        "prometheus_client.exposition",
        "prometheus_client.gc_collector",
        "prometheus_client.metrics_core",
        "prometheus_client.platform_collector",
        "prometheus_client.process_collector",
        "prometheus_client.samples",
        "prometheus_client.utils",
    },
    "mcp_tools/sdk.py": {
        "anyio",
        "httpx2",
        "mcp",
        "mcp.client.streamable_http",
        "mcp.shared.exceptions",
        "mcp_types",
    },
    # Optional dependencies (the postgres and otel extras).
    "store/__init__.py": {
        "generic_framework.store.postgres",
        # A turn without a conversation imports no database module (0314).
        "generic_framework.store.sqlite",
    },
    "store/postgres.py": {"psycopg", "psycopg_pool"},
    "store/postgres_errors.py": {"psycopg", "psycopg_pool"},
    "store/postgres_locks.py": {"psycopg"},
    "store/postgres_slots.py": {"psycopg"},
    "telemetry/tracing.py": {
        "opentelemetry",
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "opentelemetry.sdk.resources",
        "opentelemetry.sdk.trace",
        "opentelemetry.sdk.trace.export",
    },
}


def _deferred(path: Path) -> set[str]:
    """The modules ``path`` imports inside a function (``import x`` or ``from x import ...``)."""
    found: set[str] = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module:
                    found.add(node.module)
                elif isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
    return found


def test_only_the_measured_imports_are_deferred() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        deferred = _deferred(path)
        if deferred:
            found[path.relative_to(PACKAGE).as_posix()] = deferred
    assert found == ALLOWED


def test_the_finder_sees_an_import_inside_a_method(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import re\nclass A:\n    def f(self):\n        import json\n        from os import path\n",
        encoding="utf-8",
    )
    assert _deferred(probe) == {"json", "os"}
