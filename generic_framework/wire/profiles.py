"""Model profiles: the GLM models a user can pick, and what each one's requests may carry.

One table (:data:`PROFILES`) says, per model id, whether ``thinking.type: "disabled"`` is
accepted, whether ``thinking.clear_thinking`` means anything, which ``reasoning_effort`` values
are taken, whether ``tool_stream`` is, and the context window and output limit. Requests are
shaped by it (:func:`shape_request`, called by ``Persona._call_llm``), settings are checked
against it when a persona is bound (:func:`check_choice`: a choice the model cannot take is a
:class:`~generic_framework.errors.ConfigError` naming the variable, exit 2 at start-up, not a
400 at the first paid call), and the mock refuses what it says the real service refuses.

Sources are in docs/protocol.md §9b; values nobody here could confirm are marked there.
An id the table does not know passes unchanged, with one warning per id and process
(:func:`profile_for`): Z.AI ships models faster than any table follows.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import get_args

from generic_framework.limits import ReasoningEffort
from generic_framework.wire.messages import ChatRequest, FunctionToolSpec

__all__ = [
    "DEFAULT_EFFORT",
    "PROFILES",
    "REASONING_EFFORTS",
    "ModelProfile",
    "ReasoningEffort",
    "check_choice",
    "default_effort",
    "nearest_effort",
    "profile_for",
    "sees",
    "shape_request",
]

logger = logging.getLogger("generic_framework.models")

REASONING_EFFORTS: tuple[ReasoningEffort, ...] = get_args(ReasoningEffort)
"""Every ``reasoning_effort`` value Z.AI documents (GLM-5.2); a model takes a subset."""

DEFAULT_EFFORT: ReasoningEffort = "high"
"""The ``reasoning_effort`` sent when nobody chose one (neither the persona file, nor
``LLM_REASONING_EFFORT``, nor the client), to a model that takes efforts: not ``max``, which
GLM-5.3 runs at when a request names none (its most expensive tier: docs/design/0318)."""

_COST_ORDER: tuple[ReasoningEffort, ...] = (
    "none",
    "minimal",
    "low",
    "medium",
    "high",
    "xhigh",
    "max",
)

_GLM52_EFFORTS: tuple[ReasoningEffort, ...] = REASONING_EFFORTS
_GLM53_EFFORTS: tuple[ReasoningEffort, ...] = ("low", "high", "max")


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What one GLM model accepts.

    Attributes:
        id: the model id as sent (lower case).
        family: the family shown in listings (``GLM-4.7``).
        vision: takes image content (a vision model).
        thinking_off: ``thinking.type: "disabled"`` is accepted (GLM-5.3 refuses it: 1210).
        clear_thinking: ``thinking.clear_thinking`` (preserved thinking) is documented for it.
        efforts: the ``reasoning_effort`` values it takes; empty when it takes none.
        tool_stream: ``tool_stream: true`` streams its function-call arguments.
        context_window: tokens of prompt and answer together.
        max_output: the most tokens one answer may have (``max_tokens``' ceiling).
    """

    id: str
    family: str
    vision: bool
    thinking_off: bool
    clear_thinking: bool
    efforts: tuple[ReasoningEffort, ...]
    tool_stream: bool
    context_window: int
    max_output: int


def _family(
    family: str,
    ids: tuple[str, ...],
    *,
    vision: bool = False,
    thinking_off: bool = True,
    clear_thinking: bool,
    efforts: tuple[ReasoningEffort, ...] = (),
    tool_stream: bool,
    context_window: int,
    max_output: int,
) -> list[ModelProfile]:
    return [
        ModelProfile(
            id=model,
            family=family,
            vision=vision,
            thinking_off=thinking_off,
            clear_thinking=clear_thinking,
            efforts=efforts,
            tool_stream=tool_stream,
            context_window=context_window,
            max_output=max_output,
        )
        for model in ids
    ]


_K = 1024

PROFILES: dict[str, ModelProfile] = {
    profile.id: profile
    for profile in [
        *_family(
            "GLM-4.5",
            ("glm-4.5", "glm-4.5-air", "glm-4.5-x", "glm-4.5-airx", "glm-4.5-flash"),
            clear_thinking=False,
            tool_stream=False,
            context_window=128 * _K,
            max_output=96 * _K,
        ),
        *_family(
            "GLM-4.6",
            ("glm-4.6",),
            clear_thinking=False,
            tool_stream=True,
            context_window=200 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-4.7",
            ("glm-4.7", "glm-4.7-flash", "glm-4.7-flashx"),
            clear_thinking=True,
            tool_stream=True,
            context_window=200 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-5",
            ("glm-5", "glm-5-turbo"),
            clear_thinking=True,
            tool_stream=True,
            context_window=200 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-5.1",
            ("glm-5.1",),
            clear_thinking=True,
            tool_stream=True,
            context_window=200 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-5.2",
            ("glm-5.2",),
            clear_thinking=True,
            efforts=_GLM52_EFFORTS,
            tool_stream=True,
            context_window=1024 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-5.3",
            ("glm-5.3", "glm-5.3-flashx"),
            thinking_off=False,
            clear_thinking=True,
            efforts=_GLM53_EFFORTS,
            tool_stream=True,
            context_window=1024 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-5.3-Flash",
            ("glm-5.3-flash",),
            vision=True,
            thinking_off=False,
            clear_thinking=True,
            efforts=_GLM53_EFFORTS,
            tool_stream=True,
            context_window=1024 * _K,
            max_output=128 * _K,
        ),
        *_family(
            "GLM-4.5V",
            ("glm-4.5v",),
            vision=True,
            clear_thinking=False,
            tool_stream=False,
            context_window=64 * _K,
            max_output=16 * _K,
        ),
        *_family(
            "GLM-4.6V",
            ("glm-4.6v", "glm-4.6v-flash", "glm-4.6v-flashx"),
            vision=True,
            clear_thinking=False,
            tool_stream=False,
            context_window=128 * _K,
            max_output=32 * _K,
        ),
        *_family(
            "GLM-5V-Turbo",
            ("glm-5v-turbo",),
            vision=True,
            clear_thinking=True,
            tool_stream=False,
            context_window=200 * _K,
            max_output=128 * _K,
        ),
    ]
}
"""The pickable models by id (docs/protocol.md §9b has each value's source)."""

_warned: set[str] = set()
_warned_lock = threading.Lock()


def profile_for(model: str, *, warn: bool = True) -> ModelProfile | None:
    """The profile of ``model`` (case-insensitive), or ``None`` for an id the table lacks.

    An unknown id is sent as it is; with ``warn``, the first lookup of each unknown id in this
    process logs one warning saying nothing is checked or added for it.
    """
    profile = PROFILES.get(model.strip().lower())
    if profile is None and warn:
        with _warned_lock:
            first = model not in _warned
            _warned.add(model)
        if first:
            logger.warning(
                "model %r is not in the model table (generic_framework.wire.profiles): it is "
                "sent as it is, without tool_stream, and its thinking and reasoning_effort "
                "settings are not checked",
                model,
            )
    return profile


def nearest_effort(wanted: str, efforts: tuple[ReasoningEffort, ...]) -> ReasoningEffort:
    """The value of ``efforts`` nearest ``wanted`` in cost order (``none`` ... ``max``); between
    two as near, the higher (the caller asked for at least that much thought)."""
    rank = _COST_ORDER.index(wanted) if wanted in _COST_ORDER else len(_COST_ORDER) // 2
    return min(efforts, key=lambda e: (abs(_COST_ORDER.index(e) - rank), -_COST_ORDER.index(e)))


def default_effort(model: str) -> ReasoningEffort | None:
    """:data:`DEFAULT_EFFORT` as ``model`` takes it (the nearest), or ``None`` for a model that
    takes no effort or is not in the table."""
    profile = profile_for(model, warn=False)
    if profile is None or not profile.efforts:
        return None
    return nearest_effort(DEFAULT_EFFORT, profile.efforts)


def sees(model: str) -> bool:
    """Whether ``model`` takes pictures, by the table; an unknown id is taken not to (its
    pictures are described first, never sent to a model that may refuse them)."""
    profile = profile_for(model, warn=False)
    return profile is not None and profile.vision


def check_choice(
    model: str,
    *,
    thinking: str | None,
    clear_thinking: bool | None,
    reasoning_effort: str | None,
    names: dict[str, str],
) -> str | None:
    """What ``model`` cannot take among the chosen settings, in words; ``None`` when all fit.

    Args:
        names: where each choice came from, for the message: keys ``model``, ``thinking``,
            ``clear_thinking``, ``reasoning_effort``; values such as ``"LLM_THINKING"`` or
            ``"persona 'scout': thinking"``.
    """
    profile = profile_for(model)
    if profile is None:
        return None
    where = names.get("model", "LLM_MODEL")
    if thinking == "disabled" and not profile.thinking_off:
        return (
            f"{names.get('thinking', 'LLM_THINKING')}=disabled: {profile.family} "
            f"({where}={model}) always thinks and refuses thinking.type 'disabled'; leave it "
            f"unset or 'enabled', and lower the cost with reasoning_effort "
            f"({', '.join(profile.efforts)})"
        )
    if clear_thinking is not None and not profile.clear_thinking:
        return (
            f"{names.get('clear_thinking', 'clear_thinking')}: {profile.family} "
            f"({where}={model}) has no preserved thinking (clear_thinking is documented for "
            "GLM-4.7 and GLM-5.x); remove it"
        )
    if reasoning_effort is not None and reasoning_effort not in profile.efforts:
        name = names.get("reasoning_effort", "LLM_REASONING_EFFORT")
        if not profile.efforts:
            return (
                f"{name}={reasoning_effort}: {profile.family} ({where}={model}) takes no "
                "reasoning_effort (GLM-5.2 and later do); leave it unset"
            )
        return (
            f"{name}={reasoning_effort}: {profile.family} ({where}={model}) takes only "
            f"{', '.join(profile.efforts)}"
        )
    return None


def shape_request(request: ChatRequest, *, stream: bool) -> ChatRequest:
    """``request`` as the profile of its model wants it sent.

    ``tool_stream: true`` goes with a streamed request that offers function tools to a model
    that takes it (its arguments then arrive in pieces, and the connection is never idle
    while a long call is written: docs/protocol.md §4). ``reasoning_effort`` and
    ``thinking.clear_thinking`` are dropped for a model whose profile does not take them
    (settings are checked when a persona is bound; this keeps a request built by hand
    honest too). An unknown model's request is sent unchanged.
    """
    profile = profile_for(request.model)
    if profile is None:
        return request
    update = _fixes(request, profile, stream=stream)
    return request.model_copy(update=update) if update else request


def _fixes(request: ChatRequest, profile: ModelProfile, *, stream: bool) -> dict[str, object]:
    """The fields of ``request`` that ``profile`` wants otherwise, with their new values."""
    update: dict[str, object] = {}
    offers_functions = any(isinstance(t, FunctionToolSpec) for t in request.tools or ())
    wanted = True if stream and offers_functions and profile.tool_stream else None
    if request.tool_stream != wanted:
        update["tool_stream"] = wanted
    if request.reasoning_effort is not None and request.reasoning_effort not in profile.efforts:
        update["reasoning_effort"] = None
    thinking = request.thinking
    if thinking is not None and thinking.clear_thinking is not None and not profile.clear_thinking:
        update["thinking"] = thinking.model_copy(update={"clear_thinking": None})
    return update
