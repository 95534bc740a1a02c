"""The ``@tool`` decorator and :class:`FunctionTool`: a Python function the model may call.

The JSON schema is built once, when the function is decorated, from its type hints and its
Google-style docstring through public pydantic APIs (``create_model`` and
``model_json_schema``). Arguments from the model are validated against the same pydantic model
before the function runs, so the function only ever sees values that match its signature.

:meth:`FunctionTool.run` never raises for the model's mistakes: bad JSON, invalid arguments, an
exception inside the function or a timeout all come back as a :class:`ToolOutcome` with
``ok=False`` and an error text the model can read. Only :class:`~generic_framework.wire.errors.
ToolLoopError` (a framework bug) and cancellation propagate.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json

from generic_framework.errors import ConfigError, ToolLoopError
from generic_framework.offload import Offload
from generic_framework.redaction import redact
from generic_framework.wire.messages import FunctionDefinition, FunctionToolSpec

__all__ = [
    "NO_OUTPUT",
    "TOOL_NAME_PATTERN",
    "FunctionTool",
    "Tool",
    "ToolError",
    "ToolOutcome",
    "parse_docstring",
    "render_output",
    "tool",
]

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""Z.AI's rule for function names (docs/protocol.md §2.3)."""

NO_OUTPUT = "(no output)"
"""What the model reads when a function returned nothing: an empty tool message is avoided
(docs/protocol.md §5 found no evidence that Z.AI accepts one for function results)."""

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|References|Todo):\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ERROR_LIMIT = 2000

ToolFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one tool call, as the loop needs it.

    Attributes:
        ok: False when the call failed in a way the model should hear about.
        content: the text of the ``role: "tool"`` message.
        value: what the function returned (``None`` when it failed).
        error: a short description of the failure, or ``None``.
    """

    ok: bool
    content: str
    value: Any = None
    error: str | None = None


class ToolError(Exception):
    """Raise it from a tool to tell the model exactly this message (no exception type added).

    Any other exception reaches the model as ``Error: tool 'x' failed: TypeName: message``.
    """


class Tool(Protocol):
    """What a tool plan offers and runs: a :class:`FunctionTool`, or a tool of an MCP server.

    ``run`` never raises for the model's mistakes or the tool's failures: it returns a
    :class:`ToolOutcome` with ``ok=False`` and a text the model can read.
    """

    @property
    def name(self) -> str:
        """The name the model calls it by."""
        ...

    @property
    def spec(self) -> FunctionToolSpec:
        """The ``{"type": "function"}`` wire form."""
        ...

    async def run(self, arguments: str, *, time_limit: float) -> ToolOutcome:
        """Run one call with the model's JSON ``arguments``."""
        ...


def render_output(value: Any) -> str:
    """Turn a function's return value into tool-message text (strings as is, the rest as JSON)."""
    if isinstance(value, str):
        return value if value else NO_OUTPUT
    if value is None:
        return NO_OUTPUT
    return to_json(value, fallback=str).decode()


class FunctionTool:
    """A Python function offered to the model as a ``{"type": "function"}`` tool.

    Build one with :func:`tool`. The instance stays callable like the function it wraps.

    Attributes:
        name: the name the model calls it by (``^[a-zA-Z0-9_-]{1,64}$``).
        description: what the model reads to decide when to call it.
        fn: the wrapped function (sync or async).
        parameters: the JSON schema of the arguments.
        spec: the wire form, built once.
    """

    __slots__ = (
        "_args_model",
        "_fields",
        "_offload",
        "description",
        "fn",
        "inline",
        "is_async",
        "name",
        "spec",
    )

    def __init__(
        self,
        fn: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        inline: bool = False,
    ) -> None:
        if not callable(fn):
            raise ConfigError(f"@tool needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not TOOL_NAME_PATTERN.match(self.name):
            raise ConfigError(
                f"tool name {self.name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
            )
        summary, arg_docs = parse_docstring(inspect.getdoc(fn))
        self.description = (description or summary).strip()
        if not self.description:
            raise ConfigError(
                f"tool {self.name!r} has no description: add a docstring or @tool(description=...)"
            )
        self.is_async = inspect.iscoroutinefunction(fn)
        self.inline = inline and not self.is_async
        self._offload = Offload()
        self._args_model, self._fields = _arguments_model(fn, self.name, arg_docs)
        parameters = _strip_titles(self._args_model.model_json_schema())
        parameters.setdefault("properties", {})
        self.spec = FunctionToolSpec(
            function=FunctionDefinition(
                name=self.name, description=self.description, parameters=parameters
            )
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments."""
        return self.spec.function.parameters

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r})"

    def to_wire(self) -> dict[str, Any]:
        """The ``{"type": "function", "function": {...}}`` object sent in ``tools``."""
        return self.spec.model_dump(exclude_none=True)

    def parse_arguments(self, arguments: str) -> dict[str, Any] | str:
        """Validate the model's JSON arguments; return keyword arguments or an error text."""
        try:
            parsed = self._args_model.model_validate_json(arguments.strip() or "{}")
        except ValidationError as exc:
            return _explain_invalid(self.name, exc)
        return {param: getattr(parsed, field) for field, param in self._fields}

    async def run(self, arguments: str, *, time_limit: float) -> ToolOutcome:
        """Validate ``arguments`` (a JSON string), call the function within ``time_limit`` s.

        Sync functions run in a worker thread (:class:`~generic_framework.offload.Offload`:
        the loop waits up to a millisecond for a quick one instead of paying for a full trip
        through the event loop); when one times out, the thread cannot be stopped and finishes
        in the background, its result discarded. An ``inline`` sync function runs on the event
        loop itself, with no time limit.
        """
        kwargs = self.parse_arguments(arguments)
        if isinstance(kwargs, str):
            return ToolOutcome(ok=False, content=kwargs, error=kwargs)
        deadline = None if self.inline else asyncio.timeout(time_limit)
        try:
            if deadline is None:
                value = self.fn(**kwargs)
            else:
                async with deadline:
                    value = await self._invoke(kwargs)
        except ToolLoopError:
            raise
        except Exception as exc:
            if deadline is not None and deadline.expired():
                text = f"Error: tool {self.name!r} timed out after {time_limit:g} seconds."
            elif isinstance(exc, ToolError):
                text = redact(f"Error: tool {self.name!r} failed: {exc}", _ERROR_LIMIT)
            else:
                text = redact(
                    f"Error: tool {self.name!r} failed: {type(exc).__name__}: {exc}", _ERROR_LIMIT
                )
            return ToolOutcome(ok=False, content=text, error=text)
        return ToolOutcome(ok=True, content=render_output(value), value=value)

    async def _invoke(self, kwargs: dict[str, Any]) -> Any:
        if self.is_async:
            return await self.fn(**kwargs)
        result = await self._offload.run(self.fn, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


@overload
def tool(
    fn: ToolFunction,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
) -> FunctionTool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, inline: bool = False
) -> Callable[[ToolFunction], FunctionTool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    inline: bool = False,
) -> FunctionTool | Callable[[ToolFunction], FunctionTool]:
    """Turn a function into a :class:`FunctionTool`; use bare (``@tool``) or with arguments.

    Args:
        fn: the function (when used bare).
        name: the tool's name; defaults to the function's name.
        description: what the model reads; defaults to the docstring's summary.
        inline: run a sync function on the event loop instead of a worker thread. Only for
            functions that return within microseconds and never block (pure computation):
            the thread hop costs more CPU than such a function, but an inline function that
            blocks stalls every conversation of the process and cannot time out.

    Returns:
        The tool, or a decorator that makes one.

    Raises:
        ConfigError: the name is invalid, there is no description, or a parameter cannot be
            described (``*args``/``**kwargs``, a name starting with ``_``).

    Example:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> add.name, add.parameters["required"]
        ('add', ['a', 'b'])
    """
    if fn is not None:
        return FunctionTool(fn, name=name, description=description, inline=inline)

    def decorate(function: ToolFunction) -> FunctionTool:
        return FunctionTool(function, name=name, description=description, inline=inline)

    return decorate


class _ArgsSection:
    """The entries of an ``Args:`` section, one line at a time (continuations appended)."""

    def __init__(self) -> None:
        self.args: dict[str, str] = {}
        self.current: str | None = None
        self.indent = 0

    def add(self, line: str) -> None:
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line.strip())
        if match and (self.current is None or indent <= self.indent):
            self.current, self.indent = match.group(1), indent
            self.args[self.current] = match.group(2).strip()
        elif self.current is not None:
            self.args[self.current] = f"{self.args[self.current]} {line.strip()}".strip()


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args:`` entries."""
    if not doc:
        return "", {}
    summary: list[str] = []
    args = _ArgsSection()
    section: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        header = _SECTION.match(line.strip()) if not line.startswith(" ") else None
        if header:
            section = header.group(1)
            args.current = None
        elif section is None:
            summary.append(line)
        elif section in _ARG_SECTIONS and line.strip():
            args.add(line)
    paragraphs = "\n".join(summary).split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip()), args.args


def _arguments_model(
    fn: ToolFunction, tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], tuple[tuple[str, str], ...]]:
    """Build the pydantic model of the arguments; fields are aliased to the parameter names.

    Internal field names (``a0``, ``a1``...) keep parameters such as ``json`` or ``schema``
    from clashing with BaseModel attributes; the alias is what the model sees and sends.
    """
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise ConfigError(f"tool {tool_name!r}: cannot read its signature ({exc})") from exc
    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"tool {tool_name!r}: *args/**kwargs cannot be described to the model; "
                f"declare each argument ({param.name})"
            )
        if param.name.startswith("_"):
            raise ConfigError(f"tool {tool_name!r}: argument {param.name!r} starts with '_'")
        default = param.default if param.default is not param.empty else ...
        field = Field(default, alias=param.name, description=arg_docs.get(param.name))
        fields[f"a{index}"] = (hints.get(param.name, Any), field)
        names.append((f"a{index}", param.name))
    config = ConfigDict(extra="ignore", populate_by_name=False, arbitrary_types_allowed=True)
    model_name = f"{tool_name.replace('-', '_')}_arguments"
    try:
        model: type[BaseModel] = create_model(model_name, __config__=config, **fields)
        model.model_json_schema()
    except Exception as exc:
        raise ConfigError(f"tool {tool_name!r}: its arguments have no JSON schema ({exc})") from exc
    return model, tuple(names)


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for the model), keep everything else."""
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in {"properties", "$defs", "definitions"} and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


def _explain_invalid(name: str, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    if any(err["type"] == "json_invalid" for err in errors):
        return f"Error: the arguments for {name!r} are not valid JSON. Send a JSON object."
    problems = "; ".join(
        f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
        for err in errors[:10]
    )
    return redact(f"Error: invalid arguments for {name!r}: {problems}", _ERROR_LIMIT)
