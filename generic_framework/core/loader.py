"""Personas from TOML files.

A persona file (every key but ``system_prompt`` is optional)::

    name = "scout"                      # default: the file name without .toml
    description = "Answers // web questions with numbered sources."
    system_prompt = '''You are Scout...'''
    model = "glm-4.7"                   # LLM_MODEL
    temperature = 0.3                   # LLM_TEMPERATURE
    thinking = "disabled"               # LLM_THINKING: enabled | disabled
    max_tool_rounds = 4                 # MAX_TOOL_ROUNDS
    tools = ["current_time", "calculate"]   # example tools or tools from tool_modules
    tool_modules = ["my_package.tools"]     # modules whose @tool functions become available
    tools_always = false                # offer function tools without // too
    final_answer_fallback = "..."

    [web_search]                        # WEB_SEARCH_* for this persona
    mode = "builtin"                    # builtin | client | off
    engine = "search_pro_jina"
    count = 5
    recency = "oneWeek"                 # oneDay | oneWeek | oneMonth | oneYear | noLimit
    domain_filter = "example.com"
    content_size = "medium"             # medium | high

Without ``tools``, every tool of ``tool_modules`` is offered (none when there are no modules).
Every error names the file, the field and what is wrong, as a :class:`ConfigError`.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from generic_framework.client import GLMClient
from generic_framework.config import Settings
from generic_framework.core.history import ConversationStore
from generic_framework.core.persona import DEFAULT_FINAL_ANSWER_FALLBACK, Persona
from generic_framework.errors import ConfigError
from generic_framework.tools.base import FunctionTool
from generic_framework.tools.examples import EXAMPLE_TOOLS
from generic_framework.tools.web_search import WebSearch

__all__ = ["PersonaFile", "load_persona", "load_personas"]


class PersonaFile(BaseModel):
    """The schema of a persona file; unknown keys are errors (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1, max_length=64)
    description: str = ""
    system_prompt: str = Field(min_length=1)
    model: str | None = Field(default=None, min_length=1)
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)
    thinking: Literal["enabled", "disabled"] | None = None
    max_tool_rounds: int | None = Field(default=None, ge=0, le=50)
    tools: list[str] | None = None
    tool_modules: list[str] = Field(default_factory=list)
    tools_always: bool = False
    final_answer_fallback: str = Field(default=DEFAULT_FINAL_ANSWER_FALLBACK, min_length=1)
    web_search: WebSearch | None = None


def load_persona(
    path: str | Path,
    *,
    settings: Settings | None = None,
    client: GLMClient | None = None,
    store: ConversationStore | None = None,
) -> Persona:
    """Load one persona file.

    Args:
        path: the ``.toml`` file.
        settings: defaults for what the file leaves out; ``Settings()`` when omitted.
        client: a client to share between personas (else the persona makes its own).
        store: a conversation store to share (else one on ``settings.database_path``).

    Raises:
        ConfigError: the file is missing, not TOML, or a field is invalid; the message names
            the file and the field.
    """
    path = Path(path)
    spec = _read(path)
    tools = _resolve_tools(path, spec)
    try:
        return Persona(
            name=spec.name or path.stem,
            system_prompt=spec.system_prompt,
            tools=tools,
            settings=settings,
            model=spec.model,
            temperature=spec.temperature,
            thinking=spec.thinking,
            max_tool_rounds=spec.max_tool_rounds,
            web_search=spec.web_search,
            tools_always=spec.tools_always,
            description=spec.description,
            final_answer_fallback=spec.final_answer_fallback,
            client=client,
            store=store,
        )
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}") from exc


def load_personas(
    directory: str | Path,
    *,
    settings: Settings | None = None,
    client: GLMClient | None = None,
    store: ConversationStore | None = None,
) -> dict[str, Persona]:
    """Load every ``*.toml`` file of ``directory``, by persona name, in file-name order.

    Raises:
        ConfigError: the directory is missing, a file is invalid, or two files use one name.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(f"personas directory {str(directory)!r} does not exist (PERSONAS_DIR)")
    personas: dict[str, Persona] = {}
    origin: dict[str, Path] = {}
    for path in sorted(directory.glob("*.toml")):
        persona = load_persona(path, settings=settings, client=client, store=store)
        if persona.name in personas:
            raise ConfigError(
                f"{path}: name: {persona.name!r} is already used by {origin[persona.name]}"
            )
        personas[persona.name] = persona
        origin[persona.name] = path
    return personas


def _read(path: Path) -> PersonaFile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: persona file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return PersonaFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_explain(exc)}") from None


def _explain(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "file"
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown key (check the spelling)"
        elif err["type"] == "missing":
            message = "is required"
        problems.append(f"{field}: {message}")
    return "; ".join(problems)


def _resolve_tools(path: Path, spec: PersonaFile) -> list[FunctionTool]:
    from_modules: dict[str, FunctionTool] = {}
    for index, module_name in enumerate(spec.tool_modules):
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(
                f"{path}: tool_modules[{index}]: cannot import {module_name!r} "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        found = [value for value in vars(module).values() if isinstance(value, FunctionTool)]
        if not found:
            raise ConfigError(
                f"{path}: tool_modules[{index}]: {module_name!r} defines no @tool functions"
            )
        from_modules.update((each.name, each) for each in found)
    if spec.tools is None:
        return list(from_modules.values())
    available = {**EXAMPLE_TOOLS, **from_modules}
    tools = []
    for index, name in enumerate(spec.tools):
        if name not in available:
            raise ConfigError(
                f"{path}: tools[{index}]: unknown tool {name!r}; "
                f"available: {', '.join(sorted(available))}"
            )
        tools.append(available[name])
    return tools
