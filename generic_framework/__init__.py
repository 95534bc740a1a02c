"""generic_framework: chat personas backed by Z.AI's GLM models.

The public API is re-exported here and loaded on first use (PEP 562), so ``import
generic_framework`` stays cheap for CLI start-up; ``from generic_framework import Persona``
imports only what Persona needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "APIConnectionError": "generic_framework.errors",
    "APIError": "generic_framework.errors",
    "APIStatusError": "generic_framework.errors",
    "APITimeoutError": "generic_framework.errors",
    "AuthenticationError": "generic_framework.errors",
    "BadRequestError": "generic_framework.errors",
    "Citation": "generic_framework.core.reply",
    "ConfigError": "generic_framework.errors",
    "ContentFilterError": "generic_framework.errors",
    "ConversationStore": "generic_framework.core.history",
    "Done": "generic_framework.core.events",
    "FunctionTool": "generic_framework.tools",
    "GLMClient": "generic_framework.client",
    "GLMError": "generic_framework.errors",
    "InsufficientBalanceError": "generic_framework.errors",
    "NotFoundError": "generic_framework.errors",
    "Persona": "generic_framework.core.persona",
    "PersonaEvent": "generic_framework.core.events",
    "QuotaExceededError": "generic_framework.errors",
    "RateLimitError": "generic_framework.errors",
    "Reply": "generic_framework.core.reply",
    "ResponseValidationError": "generic_framework.errors",
    "RoundStarted": "generic_framework.core.events",
    "RoundState": "generic_framework.core.reply",
    "ServerError": "generic_framework.errors",
    "Settings": "generic_framework.config",
    "StopReason": "generic_framework.core.reply",
    "TextDelta": "generic_framework.core.events",
    "ToolCallInfo": "generic_framework.core.reply",
    "ToolFinished": "generic_framework.core.events",
    "ToolLoopError": "generic_framework.errors",
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
    "FunctionTool",
    "GLMClient",
    "GLMError",
    "InsufficientBalanceError",
    "NotFoundError",
    "Persona",
    "PersonaEvent",
    "QuotaExceededError",
    "RateLimitError",
    "Reply",
    "ResponseValidationError",
    "RoundStarted",
    "RoundState",
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
    from generic_framework.client import (
        GLMClient,
    )
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
    from generic_framework.core.history import (
        ConversationStore,
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
    from generic_framework.errors import (
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
    from generic_framework.tools import (
        FunctionTool,
        WebSearch,
        tool,
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
