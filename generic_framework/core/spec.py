"""PersonaSpec: what a persona is, as frozen data, validated in one place.

Persona files (:mod:`~generic_framework.core.loader`) and code (:class:`Persona(...)
<generic_framework.core.persona.Persona>`) both build a :class:`PersonaSpec`; its field types
come from :mod:`generic_framework.limits`, the same rules the environment's settings follow.
Fields left ``None`` take the settings' values when the spec is resolved
(:meth:`PersonaSpec.resolve`), which a persona does once, when it is bound to a runtime; the
result is a :class:`ResolvedSpec`, whose model and round cap cannot be ``None``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from generic_framework.config import Settings
from generic_framework.errors import ConfigError
from generic_framework.limits import (
    ModelId,
    ReasoningEffort,
    Temperature,
    ThinkingMode,
    ToolRounds,
    check_persona_name,
    shown,
    wording,
)
from generic_framework.mcp_tools.spec import MCPServerSpec
from generic_framework.memory.spec import MemorySpec
from generic_framework.tools.web_search import WebSearch
from generic_framework.wire.messages import Thinking
from generic_framework.wire.profiles import check_choice, default_effort, profile_for

__all__ = [
    "CLIENT_PARAMETERS",
    "DEFAULT_FINAL_ANSWER_FALLBACK",
    "ClientParameter",
    "ParameterRule",
    "PersonaSpec",
    "ResolvedSpec",
    "explain",
]

ClientParameter = Literal[
    "temperature", "top_p", "max_tokens", "stop", "response_format", "tools", "user"
]
"""The request parameters of an OpenAI client a persona file may pin (``max_tokens`` covers
``max_completion_tokens`` too)."""
CLIENT_PARAMETERS: tuple[ClientParameter, ...] = (
    "temperature", "top_p", "max_tokens", "stop", "response_format", "tools", "user",
)  # fmt: skip
ParameterRule = Literal["accept", "ignore", "refuse"]
"""What a persona does with a client's value: use it, drop it silently, or answer 400."""

DEFAULT_FINAL_ANSWER_FALLBACK = (
    "Sorry, I could not put an answer together this time. Please try again or rephrase."
)


class PersonaSpec(BaseModel):
    """A persona as data: the keys of a persona file, frozen once validated.

    Attributes:
        name: identifies the persona (1-64 letters, digits, ``._-``).
        description: one line for listings (``generic-framework personas``, ``/v1/models``).
        system_prompt: the instructions sent first in every request (blank: none sent).
        model: the GLM model id; ``None`` takes ``LLM_MODEL``.
        temperature: 0.0-1.0; ``None`` takes ``LLM_TEMPERATURE`` (unset: the server default).
        thinking: ``enabled``/``disabled`` or a :class:`Thinking`; ``None`` takes ``LLM_THINKING``.
        reasoning_effort: ``max`` ... ``none`` for the models that take it (GLM-5.2 and
            later, :mod:`generic_framework.wire.profiles`); ``None`` takes
            ``LLM_REASONING_EFFORT`` (unset: ``high``, or the nearest the model takes:
            :data:`~generic_framework.wire.profiles.DEFAULT_EFFORT`, never the model's own
            default, which is ``max`` on GLM-5.3).
        vision_model: the model that describes a picture for this persona when its own model
            cannot see (:mod:`generic_framework.pictures.vision`); ``None`` takes
            ``LLM_VISION_MODEL``. It must be a vision model of the model table.
        max_tool_rounds: tool rounds before the forced final answer; ``None`` takes
            ``MAX_TOOL_ROUNDS``; 0 turns tools off.
        web_search: how ``//`` messages search; unset fields take the ``WEB_SEARCH_*`` settings.
            ``False`` means ``WebSearch(mode="off")``.
        tools: names of the function tools (example tools or tools of ``tool_modules``);
            ``None`` offers every tool of ``tool_modules``.
        tool_modules: modules whose ``@tool`` functions become available.
        tools_always: offer the function tools (and MCP tools) on messages without ``//`` too.
        mcp_servers: MCP servers whose tools are offered beside the function tools, under
            ``{server}__{tool}`` names (:mod:`generic_framework.mcp_tools`); ``${VAR}`` in
            them stays as written until a runtime expands it from its environment.
        final_answer_fallback: the reply when the model's final answer is empty.
        allow_client_system: accept a caller's system messages with a foreign history (an
            OpenAI client's ``system`` messages), sent after ``system_prompt``; ``False``
            refuses them (:mod:`generic_framework.core.history`).
        client_parameters: pins: an OpenAI client's parameter (``temperature``, ``top_p``,
            ``max_tokens``, ``stop``, ``response_format``, ``tools``, ``user``) -> ``accept``
            (the default: the client's value is sent), ``ignore`` (the persona's own is sent)
            or ``refuse`` (a request that sets it is answered 400 naming it).
        memory: the ``[memory]`` table: whether the persona keeps facts about each user
            (``remember``/``forget``, run by the turn service) and how many
            (:class:`~generic_framework.memory.spec.MemorySpec`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    system_prompt: str
    model: ModelId | None = None
    temperature: Temperature | None = None
    thinking: Thinking | None = None
    reasoning_effort: ReasoningEffort | None = None
    vision_model: ModelId | None = None
    max_tool_rounds: ToolRounds | None = None
    web_search: WebSearch = Field(default_factory=WebSearch)
    tools: tuple[str, ...] | None = None
    tool_modules: tuple[str, ...] = ()
    tools_always: bool = False
    mcp_servers: tuple[MCPServerSpec, ...] = ()
    final_answer_fallback: str = DEFAULT_FINAL_ANSWER_FALLBACK
    allow_client_system: bool = True
    client_parameters: dict[ClientParameter, ParameterRule] = Field(default_factory=dict)
    memory: MemorySpec = Field(default_factory=MemorySpec)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        try:
            return check_persona_name(value)
        except ValueError as exc:
            raise ValueError(f"{exc} (got {shown(value)})") from None

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> Any:
        if isinstance(value, str):
            allowed: tuple[ThinkingMode, ...] = ("enabled", "disabled")
            if value not in allowed:
                raise ValueError(f"must be 'enabled' or 'disabled' (got {value!r})")
            return Thinking(type=value)
        return value

    @field_validator("web_search", mode="before")
    @classmethod
    def _web_search(cls, value: Any) -> Any:
        if value is False:
            return WebSearch(mode="off")
        return WebSearch() if value is None or value is True else value

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, value: tuple[MCPServerSpec, ...]) -> tuple[MCPServerSpec, ...]:
        names = [server.name for server in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"two servers are named {', '.join(map(repr, twice))}")
        return value

    @field_validator("final_answer_fallback", mode="before")
    @classmethod
    def _fallback(cls, value: Any) -> Any:
        return DEFAULT_FINAL_ANSWER_FALLBACK if value is None or value == "" else value

    @classmethod
    def build(cls, source: str | None = None, /, **values: Any) -> PersonaSpec:
        """Validate ``values`` into a spec; problems become one :class:`ConfigError`.

        Args:
            source: prefixed to the message (a persona file's path), if given.

        Raises:
            ConfigError: naming each field and what is wrong with it.
        """
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = explain(exc)
            raise ConfigError(f"{source}: {problems}" if source else problems) from None

    def resolve(self, settings: Settings) -> ResolvedSpec:
        """This spec with every setting-backed field filled from ``settings``.

        Raises:
            ConfigError: the model cannot take the thinking or reasoning_effort chosen
                (:func:`~generic_framework.wire.profiles.check_choice`); the message names
                the variable or the persona file's key that chose it.
        """
        thinking = self.thinking
        if thinking is None and settings.llm_thinking is not None:
            thinking = Thinking(type=settings.llm_thinking)
        effort = self.reasoning_effort or settings.llm_reasoning_effort
        model = self.model or settings.llm_model
        self._check_model(model, thinking, effort)
        effort = effort or default_effort(model)
        vision = self.vision_model or settings.llm_vision_model
        self._check_vision(vision)
        temperature = self.temperature
        rounds = self.max_tool_rounds
        fields = {name: getattr(self, name) for name in type(self).model_fields}
        fields.update(
            model=model,
            temperature=temperature if temperature is not None else settings.llm_temperature,
            thinking=thinking,
            reasoning_effort=effort,
            vision_model=vision,
            max_tool_rounds=rounds if rounds is not None else settings.max_tool_rounds,
            web_search=self.web_search.resolve(settings),
        )
        return ResolvedSpec.model_validate(fields)

    def _check_model(self, model: str, thinking: Thinking | None, effort: str | None) -> None:
        """Refuse what ``model`` cannot take, naming the persona key or the variable."""
        own = f"persona {self.name!r}: "
        problem = check_choice(
            model,
            thinking=thinking.type if thinking is not None else None,
            clear_thinking=thinking.clear_thinking if thinking is not None else None,
            reasoning_effort=effort,
            names={
                "model": f"{own}model" if self.model else "LLM_MODEL",
                "thinking": f"{own}thinking" if self.thinking else "LLM_THINKING",
                "clear_thinking": f"{own}thinking.clear_thinking",
                "reasoning_effort": f"{own}reasoning_effort"
                if self.reasoning_effort
                else "LLM_REASONING_EFFORT",
            },
        )
        if problem is not None:
            raise ConfigError(problem)

    def _check_vision(self, model: str) -> None:
        """Refuse a vision model the table says cannot see (an unknown id is let through)."""
        profile = profile_for(model, warn=False)
        if profile is not None and not profile.vision:
            where = (
                f"persona {self.name!r}: vision_model"
                if self.vision_model
                else ("LLM_VISION_MODEL")
            )
            raise ConfigError(
                f"{where}={model}: {profile.family} cannot see pictures; name a vision model "
                "(glm-4.6v, glm-5v-turbo, glm-5.3-flash, ...)"
            )


class ResolvedSpec(PersonaSpec):
    """A :class:`PersonaSpec` with the settings' values filled in (:meth:`PersonaSpec.resolve`):
    what a turn engine runs. ``model`` and ``max_tool_rounds`` are always set, and
    ``web_search.mode`` is never ``auto``."""

    model: ModelId
    vision_model: ModelId
    max_tool_rounds: ToolRounds


def explain(exc: ValidationError) -> str:
    """Every problem of a validation error as ``field: what is wrong``, joined by ``; ``."""
    problems = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(part) for part in err["loc"]) or "file"
        if err["type"] == "extra_forbidden":
            message = "unknown key (check the spelling)"
        else:
            message = wording(err)
        problems.append(f"{field}: {message}")
    return "; ".join(problems)
