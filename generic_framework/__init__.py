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
    "ConfigError": "generic_framework.errors",
    "ContentFilterError": "generic_framework.errors",
    "GLMClient": "generic_framework.client",
    "GLMError": "generic_framework.errors",
    "InsufficientBalanceError": "generic_framework.errors",
    "NotFoundError": "generic_framework.errors",
    "QuotaExceededError": "generic_framework.errors",
    "RateLimitError": "generic_framework.errors",
    "ResponseValidationError": "generic_framework.errors",
    "ServerError": "generic_framework.errors",
    "Settings": "generic_framework.config",
    "ToolLoopError": "generic_framework.errors",
}

__all__ = [
    "APIConnectionError",
    "APIError",
    "APIStatusError",
    "APITimeoutError",
    "AuthenticationError",
    "BadRequestError",
    "ConfigError",
    "ContentFilterError",
    "GLMClient",
    "GLMError",
    "InsufficientBalanceError",
    "NotFoundError",
    "QuotaExceededError",
    "RateLimitError",
    "ResponseValidationError",
    "ServerError",
    "Settings",
    "ToolLoopError",
    "__version__",
]

if TYPE_CHECKING:
    from generic_framework.client import GLMClient
    from generic_framework.config import Settings
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'generic_framework' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
