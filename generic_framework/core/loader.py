"""Personas from TOML files.

A persona file (every key but ``system_prompt`` is optional)::

    name = "scout"                      # default: the file name without .toml
    description = "Answers // web questions with numbered sources."
    system_prompt = '''You are Scout...'''
    model = "glm-4.7"                   # LLM_MODEL
    temperature = 0.3                   # LLM_TEMPERATURE
    thinking = "disabled"               # LLM_THINKING: enabled | disabled
    reasoning_effort = "low"            # LLM_REASONING_EFFORT (GLM-5.2 and later)
    max_tool_rounds = 4                 # MAX_TOOL_ROUNDS
    tools = ["current_time", "calculate"]   # example tools or tools from tool_modules
    tool_modules = ["my_package.tools"]     # modules whose @tool functions become available
    tools_always = false                # offer function tools (and MCP tools) without // too
    final_answer_fallback = "..."
    allow_client_system = true          # false: refuse a client's system messages (the API's)

    [client_parameters]                 # an OpenAI client's parameters this persona pins
    temperature = "ignore"              # accept (default) | ignore (send our own) | refuse (400)
    tools = "refuse"                    # also: top_p max_tokens stop response_format user

    [memory]                            # keep facts about each user (generic_framework.memory)
    enabled = true                      # off by default: remember/forget, facts in instructions
    max_items = 20                      # facts kept per user (1-200)

    [web_search]                        # WEB_SEARCH_* for this persona
    mode = "auto"                       # auto | builtin | client | mcp | off
    engine = "search_pro_jina"
    count = 5
    recency = "oneWeek"                 # oneDay | oneWeek | oneMonth | oneYear | noLimit
    domain_filter = "example.com"
    content_size = "medium"             # medium | high
    prompt = "... {{current_date}} ... [ref_1] ..."   # WEB_SEARCH_PROMPT: the search_prompt

    [[mcp_servers]]                     # one table per MCP server (generic_framework.mcp_tools)
    name = "notes"                      # tools offered as notes__<tool>
    command = "python"                  # stdio: command, args, env, cwd ...
    args = ["tests/mcp_servers/notes_server.py"]
    env = { NOTES_FILE = "${HOME}/notes.json" }   # ${VAR}: from the environment of the runtime
    tools = ["add_note"]                # optional allowlist
    timeout = 20                        # seconds (default TOOL_TIMEOUT)
    # ... or streamable HTTP: url = "https://...", headers = { Authorization = "Bearer ${T}" }

Without ``tools``, every tool of ``tool_modules`` is offered (none when there are no modules).
Every error names the file, the field and what is wrong, as a :class:`ConfigError`. A file is a
:class:`~generic_framework.core.spec.PersonaSpec` (:func:`load_spec`); the
:class:`~generic_framework.runtime.Runtime` binds specs to its client and store, and
:func:`load_persona` / :func:`load_personas` do the same for code that wants personas directly.
"""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.core.resources import Resources
from generic_framework.core.spec import PersonaSpec
from generic_framework.errors import ConfigError
from generic_framework.tools.base import FunctionTool
from generic_framework.tools.examples import EXAMPLE_TOOLS

__all__ = ["load_persona", "load_personas", "load_spec", "load_specs", "resolve_tools"]


def load_spec(path: str | Path) -> PersonaSpec:
    """Read and validate one persona file, including that its tools exist.

    Raises:
        ConfigError: the file is missing, not TOML, or a field is invalid; the message names
            the file and the field.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: persona file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError:
        # tomllib parses nested arrays and inline tables recursively.
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply") from None
    data.setdefault("name", path.stem)
    spec = PersonaSpec.build(str(path), **data)
    resolve_tools(spec, source=str(path))
    return spec


def load_specs(directory: str | Path) -> dict[str, PersonaSpec]:
    """Every ``*.toml`` file of ``directory`` as a spec, by persona name, in file-name order.

    Raises:
        ConfigError: the directory is missing, a file is invalid, or two files use one name.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ConfigError(
            f"personas directory {str(directory)!r} does not exist: create it, or set "
            "PERSONAS_DIR to a folder of persona .toml files"
        )
    specs: dict[str, PersonaSpec] = {}
    origin: dict[str, Path] = {}
    for path in sorted(directory.glob("*.toml")):
        spec = load_spec(path)
        if spec.name in specs:
            raise ConfigError(f"{path}: name: {spec.name!r} is already used by {origin[spec.name]}")
        specs[spec.name] = spec
        origin[spec.name] = path
    return specs


def load_persona(
    path: str | Path, *, settings: Settings | None = None, runtime: Resources | None = None
) -> Persona:
    """Load one persona file as a :class:`Persona`.

    Args:
        path: the ``.toml`` file.
        settings: defaults for what the file leaves out, for a persona with its own runtime.
        runtime: the runtime to bind the persona to (its client, store and locks); without
            one the persona opens its own and closes it in ``aclose()``.

    Raises:
        ConfigError: the file is missing, not TOML, or a field is invalid.
    """
    spec = load_spec(path)
    tools = resolve_tools(spec, source=str(path))
    return Persona.from_spec(spec, tools=tools, settings=settings, runtime=runtime)


def load_personas(
    directory: str | Path, *, settings: Settings | None = None, runtime: Resources | None = None
) -> dict[str, Persona]:
    """Every persona file of ``directory`` as a :class:`Persona`, by name, in file-name order.

    Pass ``runtime`` so the personas share one client, store and set of locks; without it each
    persona opens its own on first use.

    Raises:
        ConfigError: the directory is missing, a file is invalid, or two files use one name.
    """
    return {
        name: Persona.from_spec(
            spec,
            tools=resolve_tools(spec, source=name),
            settings=settings,
            runtime=runtime,
        )
        for name, spec in load_specs(directory).items()
    }


def resolve_tools(spec: PersonaSpec, *, source: str) -> list[FunctionTool]:
    """The spec's function tools: its ``tools`` names among the example tools and the
    ``@tool`` functions of its ``tool_modules`` (all of the latter when ``tools`` is unset).

    Raises:
        ConfigError: a module cannot be imported or defines no tools, or a name is unknown.
    """
    from_modules: dict[str, FunctionTool] = {}
    for index, module_name in enumerate(spec.tool_modules):
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ConfigError(
                f"{source}: tool_modules[{index}]: cannot import {module_name!r} "
                f"({type(exc).__name__}: {exc})"
            ) from exc
        found = [value for value in vars(module).values() if isinstance(value, FunctionTool)]
        if not found:
            raise ConfigError(
                f"{source}: tool_modules[{index}]: {module_name!r} defines no @tool functions"
            )
        from_modules.update((each.name, each) for each in found)
    if spec.tools is None:
        return list(from_modules.values())
    available = {**EXAMPLE_TOOLS, **from_modules}
    tools = []
    for index, name in enumerate(spec.tools):
        if name not in available:
            raise ConfigError(
                f"{source}: tools[{index}]: unknown tool {name!r}; "
                f"available: {', '.join(sorted(available))}"
            )
        tools.append(available[name])
    return tools
