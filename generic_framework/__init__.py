"""generic_framework: chat personas backed by Z.AI's GLM models.

The public API is re-exported here and loaded on first use (PEP 562), so ``import
generic_framework`` stays cheap for CLI start-up; ``from generic_framework import Persona``
imports only what Persona needs.

:data:`_EXPORTS` is the one list of the public API: each name and the module it comes from.
``__all__`` is made from it, and the ``TYPE_CHECKING`` imports repeat it for type checkers (as
``name as name``, an explicit re-export); ``tests/architecture/test_public_api.py`` keeps the
two in step and checks that every name resolves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from generic_framework.exports import on_first_use

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "APIConnectionError": "generic_framework.wire.errors",
    "APIError": "generic_framework.wire.errors",
    "APIStatusError": "generic_framework.wire.errors",
    "APITimeoutError": "generic_framework.wire.errors",
    "Ask": "generic_framework.turns",
    "AuthenticationError": "generic_framework.wire.errors",
    "BadRequestError": "generic_framework.wire.errors",
    "Citation": "generic_framework.core.reply",
    "ConfigError": "generic_framework.errors",
    "ContentFilterError": "generic_framework.wire.errors",
    "ContextTooLongError": "generic_framework.wire.errors",
    "ConversationStore": "generic_framework.store.base",
    "Done": "generic_framework.core.events",
    "FunctionModel": "generic_framework.testing",
    "FunctionTool": "generic_framework.tools",
    "GLMClient": "generic_framework.wire.client",
    "GLMError": "generic_framework.errors",
    "InsufficientBalanceError": "generic_framework.wire.errors",
    "MCPFailure": "generic_framework.mcp_tools.connection",
    "MCPServerSpec": "generic_framework.mcp_tools.spec",
    "NotFoundError": "generic_framework.wire.errors",
    "OptionRefused": "generic_framework.turns",
    "OutputSchemaError": "generic_framework.errors",
    "Persona": "generic_framework.core.persona",
    "PersonaEvent": "generic_framework.core.events",
    "PersonaNotAllowed": "generic_framework.turns",
    "PersonaSpec": "generic_framework.core.spec",
    "PictureRefused": "generic_framework.pictures",
    "QuotaExceededError": "generic_framework.wire.errors",
    "RateLimitError": "generic_framework.wire.errors",
    "Reply": "generic_framework.core.reply",
    "ResponseValidationError": "generic_framework.wire.errors",
    "RoundStarted": "generic_framework.core.events",
    "RoundState": "generic_framework.core.reply",
    "Runtime": "generic_framework.runtime",
    "SQLiteStore": "generic_framework.store.sqlite",
    "ServerError": "generic_framework.wire.errors",
    "Settings": "generic_framework.config",
    "StopReason": "generic_framework.core.reply",
    "StoreUnavailableError": "generic_framework.errors",
    "TextDelta": "generic_framework.core.events",
    "ToolCallInfo": "generic_framework.core.reply",
    "ToolError": "generic_framework.tools.base",
    "ToolFinished": "generic_framework.core.events",
    "ToolLoopError": "generic_framework.errors",
    "ToolResult": "generic_framework.core.reply",
    "TurnHooks": "generic_framework.core.hooks",
    "TurnOptions": "generic_framework.core.options",
    "TurnRefused": "generic_framework.turns",
    "TurnService": "generic_framework.turns",
    "UpstreamBusyError": "generic_framework.wire.errors",
    "WebSearch": "generic_framework.tools",
    "load_dotenv": "generic_framework.config",
    "load_persona": "generic_framework.core.loader",
    "load_personas": "generic_framework.core.loader",
    "tool": "generic_framework.tools",
}
"""Each public name and the module it is loaded from on first use."""

__all__ = list(_EXPORTS)
__all__ += ["__version__"]

if TYPE_CHECKING:
    from generic_framework.config import Settings as Settings
    from generic_framework.config import load_dotenv as load_dotenv
    from generic_framework.core.events import Done as Done
    from generic_framework.core.events import PersonaEvent as PersonaEvent
    from generic_framework.core.events import RoundStarted as RoundStarted
    from generic_framework.core.events import TextDelta as TextDelta
    from generic_framework.core.events import ToolFinished as ToolFinished
    from generic_framework.core.hooks import TurnHooks as TurnHooks
    from generic_framework.core.loader import load_persona as load_persona
    from generic_framework.core.loader import load_personas as load_personas
    from generic_framework.core.options import TurnOptions as TurnOptions
    from generic_framework.core.persona import Persona as Persona
    from generic_framework.core.reply import Citation as Citation
    from generic_framework.core.reply import Reply as Reply
    from generic_framework.core.reply import RoundState as RoundState
    from generic_framework.core.reply import StopReason as StopReason
    from generic_framework.core.reply import ToolCallInfo as ToolCallInfo
    from generic_framework.core.reply import ToolResult as ToolResult
    from generic_framework.core.spec import PersonaSpec as PersonaSpec
    from generic_framework.errors import ConfigError as ConfigError
    from generic_framework.errors import GLMError as GLMError
    from generic_framework.errors import OutputSchemaError as OutputSchemaError
    from generic_framework.errors import StoreUnavailableError as StoreUnavailableError
    from generic_framework.errors import ToolLoopError as ToolLoopError
    from generic_framework.mcp_tools.connection import MCPFailure as MCPFailure
    from generic_framework.mcp_tools.spec import MCPServerSpec as MCPServerSpec
    from generic_framework.pictures import PictureRefused as PictureRefused
    from generic_framework.runtime import Runtime as Runtime
    from generic_framework.store.base import ConversationStore as ConversationStore
    from generic_framework.store.sqlite import SQLiteStore as SQLiteStore
    from generic_framework.testing import FunctionModel as FunctionModel
    from generic_framework.tools import FunctionTool as FunctionTool
    from generic_framework.tools import WebSearch as WebSearch
    from generic_framework.tools import tool as tool
    from generic_framework.tools.base import ToolError as ToolError
    from generic_framework.turns import Ask as Ask
    from generic_framework.turns import OptionRefused as OptionRefused
    from generic_framework.turns import PersonaNotAllowed as PersonaNotAllowed
    from generic_framework.turns import TurnRefused as TurnRefused
    from generic_framework.turns import TurnService as TurnService
    from generic_framework.wire.client import GLMClient as GLMClient
    from generic_framework.wire.errors import APIConnectionError as APIConnectionError
    from generic_framework.wire.errors import APIError as APIError
    from generic_framework.wire.errors import APIStatusError as APIStatusError
    from generic_framework.wire.errors import APITimeoutError as APITimeoutError
    from generic_framework.wire.errors import AuthenticationError as AuthenticationError
    from generic_framework.wire.errors import BadRequestError as BadRequestError
    from generic_framework.wire.errors import ContentFilterError as ContentFilterError
    from generic_framework.wire.errors import ContextTooLongError as ContextTooLongError
    from generic_framework.wire.errors import InsufficientBalanceError as InsufficientBalanceError
    from generic_framework.wire.errors import NotFoundError as NotFoundError
    from generic_framework.wire.errors import QuotaExceededError as QuotaExceededError
    from generic_framework.wire.errors import RateLimitError as RateLimitError
    from generic_framework.wire.errors import ResponseValidationError as ResponseValidationError
    from generic_framework.wire.errors import ServerError as ServerError
    from generic_framework.wire.errors import UpstreamBusyError as UpstreamBusyError


__getattr__ = on_first_use(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
