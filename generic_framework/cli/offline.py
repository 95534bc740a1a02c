"""Offline mode: answers from the embedded mock server when there is no API key (or ``--mock``).

The mock (:class:`~generic_framework.mock.MockServer`, the bundled fixtures) runs in-process on an
ephemeral loopback port; the commands get a copy of the settings pointing at it (its general or
coding endpoint, as configured, and its Web Search MCP endpoint) with a placeholder key. A
request it has no recording for fails with :data:`~generic_framework.mock.NO_MATCH_CODE`,
which :func:`unrecorded` recognises and :func:`no_recording_text` answers honestly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pydantic import SecretStr

from generic_framework.config import Settings
from generic_framework.errors import GLMError

__all__ = ["no_recording_text", "offline_notice", "unrecorded", "upstream"]

_PLACEHOLDER_KEY = "offline-mock-key"


@contextlib.contextmanager
def upstream(settings: Settings, force_mock: bool) -> Iterator[tuple[Settings, bool]]:
    """Yield the settings to use and whether answers come from the embedded mock.

    With an API key and without ``force_mock``: ``settings`` unchanged. Otherwise the embedded
    mock runs until the block ends, and the settings point at it.
    """
    if settings.has_api_key and not force_mock:
        yield settings, False
        return
    from generic_framework.mock import MockServer, bundled_fixture_paths

    with MockServer(bundled_fixture_paths()) as server:
        # The mock's twin of the configured endpoint, so WEB_SEARCH_MODE=auto picks the same
        # mode offline (mcp for a Coding Plan endpoint, through the mock's Web Search MCP).
        base = server.coding_base_url if settings.is_coding_endpoint else server.base_url
        offline = settings.model_copy(
            update={
                "base_url": base,
                "api_key": SecretStr(_PLACEHOLDER_KEY),
                "web_search_mcp_url": None,
            }
        )
        yield offline, True


def offline_notice(forced: bool) -> str:
    """The stderr line saying that answers come from the embedded mock, and why."""
    why = "--mock given" if forced else "no OPENAI_API_KEY set"
    return f"offline: {why}; answering from the embedded mock's recorded fixtures."


def unrecorded(exc: GLMError) -> bool:
    """True when the embedded mock had no recorded answer for the request."""
    from generic_framework.mock import NO_MATCH_CODE

    return exc.code == NO_MATCH_CODE


def no_recording_text(coding: bool = False, persona: str | None = None) -> str:
    """The honest answer to a question the embedded mock has no recording for.

    Args:
        coding: the configured endpoint is a Coding Plan one (its ``//`` questions differ).
        persona: the persona that was asked (``None``: the bundled fixtures' default): the
            questions listed are its own recorded ones.
    """
    from generic_framework.mock import bundled_examples
    from generic_framework.mock.fixture import DEFAULT_PERSONA

    persona = persona or DEFAULT_PERSONA
    lines = ["The embedded mock has no recorded answer for that message (it never invents one)."]
    examples = bundled_examples(persona=persona, endpoint="coding" if coding else "general")
    if not examples:
        lines.append(
            f"Set OPENAI_API_KEY for real answers: the persona {persona!r} has no recorded "
            f"questions (the bundled ones are {DEFAULT_PERSONA!r}'s and 'helper''s)."
        )
        return "\n".join(lines)
    lines.append("Set OPENAI_API_KEY for real answers, or try one of the recorded questions:")
    option = "" if persona == DEFAULT_PERSONA else f" -p {persona}"
    lines += [f"  generic-framework chat{option} {example!r}" for example in examples]
    return "\n".join(lines)
