"""generic_framework: chat personas backed by Z.AI's GLM models.

The public API is re-exported here and loaded on first use (PEP 562), so ``import
generic_framework`` stays cheap for CLI start-up; ``from generic_framework import Persona``
imports only what Persona needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from generic_framework._httpx_cli import defer_httpx_cli

# Before any module of the package imports httpx: its command-line client (click, rich,
# pygments: about 60 ms) is then loaded only if someone runs it (docs/design/0704).
defer_httpx_cli()

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "APIConnectionError": "generic_framework.wire.errors",
    "APIError": "generic_framework.wire.errors",
    "APIStatusError": "generic_framework.wire.errors",
    "APITimeoutError": "generic_framework.wire.errors",
    "AuthenticationError": "generic_framework.wire.errors",
    "BadRequestError": "generic_framework.wire.errors",
    "Citation": "generic_framework.core.reply",
    "ConfigError": "generic_framework.wire.errors",
    "ContentFilterError": "generic_framework.wire.errors",
    "ConversationStore": "generic_framework.store.base",
    "Done": "generic_framework.core.events",
    "FunctionModel": "generic_framework.testing",
    "FunctionTool": "generic_framework.tools",
    "GLMClient": "generic_framework.wire.client",
    "GLMError": "generic_framework.wire.errors",
    "InsufficientBalanceError": "generic_framework.wire.errors",
    "MCPServerSpec": "generic_framework.mcp_tools.spec",
    "NotFoundError": "generic_framework.wire.errors",
    "Persona": "generic_framework.core.persona",
    "PersonaSpec": "generic_framework.core.spec",
    "PersonaEvent": "generic_framework.core.events",
    "QuotaExceededError": "generic_framework.wire.errors",
    "RateLimitError": "generic_framework.wire.errors",
    "Reply": "generic_framework.core.reply",
    "ResponseValidationError": "generic_framework.wire.errors",
    "RoundStarted": "generic_framework.core.events",
    "Runtime": "generic_framework.runtime",
    "SQLiteStore": "generic_framework.store.sqlite",
    "RoundState": "generic_framework.core.reply",
    "ServerError": "generic_framework.wire.errors",
    "Settings": "generic_framework.config",
    "StopReason": "generic_framework.core.reply",
    "TextDelta": "generic_framework.core.events",
    "ToolCallInfo": "generic_framework.core.reply",
    "ToolFinished": "generic_framework.core.events",
    "ToolLoopError": "generic_framework.wire.errors",
    "ToolResult": "generic_framework.core.reply",
    "WebSearch": "generic_framework.tools",
    "load_dotenv": "generic_framework.config",
    "load_persona": "generic_framework.core.loader",
    "load_personas": "generic_framework.core.loader",
    "tool": "generic_framework.tools",
}

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "Citation",
    "ConfigError",
    "ContentFilterError",
    "ConversationStore",
    "Done",
    "FunctionModel",
    "FunctionTool",
    "GLMClient",
    "GLMError",
    "InsufficientBalanceError",
    "MCPServerSpec",
    "NotFoundError",
    "Persona",
    "PersonaEvent",
    "PersonaSpec",
    "QuotaExceededError",
    "RateLimitError",
    "Reply",
    "ResponseValidationError",
    "RoundStarted",
    "RoundState",
    "Runtime",
    "SQLiteStore",
    "ServerError",
    "Settings",
    "StopReason",
    "TextDelta",
    "ToolCallInfo",
    "ToolFinished",
    "ToolLoopError",
    "ToolResult",
    "WebSearch",
    "__version__",
    "load_dotenv",
    "load_persona",
    "load_personas",
    "tool",
]

if TYPE_CHECKING:
    from generic_framework.config import (
        Settings,
        load_dotenv,
    )
    from generic_framework.core.events import (
        Done,
        PersonaEvent,
        RoundStarted,
        TextDelta,
        ToolFinished,
    )
    from generic_framework.core.loader import (
        load_persona,
        load_personas,
    )
    from generic_framework.core.persona import (
        Persona,
    )
    from generic_framework.core.reply import (
        Citation,
        Reply,
        RoundState,
        StopReason,
        ToolCallInfo,
        ToolResult,
    )
    from generic_framework.core.spec import (
        PersonaSpec,
    )
    from generic_framework.mcp_tools.spec import (
        MCPServerSpec,
    )
    from generic_framework.runtime import (
        Runtime,
    )
    from generic_framework.store.base import (
        ConversationStore,
    )
    from generic_framework.store.sqlite import (
        SQLiteStore,
    )
    from generic_framework.testing import (
        FunctionModel,
    )
    from generic_framework.tools import (
        FunctionTool,
        WebSearch,
        tool,
    )
    from generic_framework.wire.client import (
        GLMClient,
    )
    from generic_framework.wire.errors import (
        APIConnectionError,
        APIError,
        APIStatusError,
        APITimeoutError,
        AuthenticationError,
        BadRequestError,
        ConfigError,
        ContentFilterError,
        GLMError,
        InsufficientBalanceError,
        NotFoundError,
        QuotaExceededError,
        RateLimitError,
        ResponseValidationError,
        ServerError,
        ToolLoopError,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'generic_framework' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
