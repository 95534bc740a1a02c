"""The vision fallback: a picture described by a vision model for a persona whose model cannot see.

A persona on a text-only model (by the model table: :func:`~generic_framework.wire.profiles.
sees`) still understands a picture: the turn service asks the persona's vision model
(``vision_model`` in its file, else ``LLM_VISION_MODEL``) for a description first, one call per
picture, with the user's text as context, and the persona's model is then sent the description
as marked text (:func:`~generic_framework.pictures.content.user_content`), never the picture
(docs/design/0328). The calls' tokens are counted in the turn's daily totals like the answer's.
"""

from __future__ import annotations

from generic_framework.core.account import TurnAccount
from generic_framework.pictures.parts import Picture
from generic_framework.wire.messages import ChatRequest, SystemMessage, UserMessage
from generic_framework.wire.model import ChatModel

__all__ = ["DESCRIBE_PROMPT", "NOTHING_SEEN", "describe", "description_request"]

DESCRIBE_PROMPT = (
    "You describe pictures for an assistant that cannot see them. Describe the picture so "
    "that the assistant can answer the user's message about it: what it shows, its layout, "
    "and every piece of text in it, transcribed exactly. Be factual and complete; do not "
    "answer the user's message yourself."
)
"""The description call's system message."""

NOTHING_SEEN = "(the vision model wrote nothing about this picture)"
"""The description when the vision model answered with no text."""


def description_request(
    vision_model: str, picture: Picture, text: str, *, user_id: str | None = None
) -> ChatRequest:
    """The one call that describes ``picture``: the prompt, then the user's text as context
    and the picture as it came."""
    context = (
        f"The user's message with this picture: {text}"
        if text.strip()
        else ("The user sent this picture without a message.")
    )
    return ChatRequest(
        model=vision_model,
        messages=[
            SystemMessage(content=DESCRIBE_PROMPT),
            UserMessage(content=[{"type": "text", "text": context}, picture.part()]),
        ],
        user_id=user_id,
    )


async def describe(
    model: ChatModel,
    vision_model: str,
    picture: Picture,
    text: str,
    *,
    account: TurnAccount,
    user_id: str | None = None,
) -> Picture:
    """``picture`` with its description by ``vision_model`` (its tokens in ``account``).

    Raises:
        GLMError: the call failed for good (the turn fails before its answer call).
    """
    completion = await model.chat(description_request(vision_model, picture, text, user_id=user_id))
    account.answered(completion)
    content = (completion.message.content or "").strip()
    return picture.described(content or NOTHING_SEEN)
