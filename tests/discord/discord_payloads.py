"""The objects of Discord's API as the fake Discord sends them: users, the bot's application,
a guild with its channels, messages and interactions (the fields discord.py reads, with
Discord's names and types: ids are strings, times ISO 8601)."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "APPLICATION_ID",
    "BOT_ID",
    "GUILD_ID",
    "application",
    "channel",
    "guild",
    "interaction",
    "message",
    "now",
    "snowflakes",
    "user",
]

BOT_ID = 900_000_000_000_000_001
APPLICATION_ID = BOT_ID
GUILD_ID = 910_000_000_000_000_001
_EPOCH = 1_420_070_400_000  # Discord's: 2015-01-01


def snowflakes() -> itertools.count[int]:
    """Ids as Discord makes them: the time in their top bits, so they grow."""
    start = (int(time.time() * 1000) - _EPOCH) << 22
    return itertools.count(start)


def now() -> str:
    """The time as Discord writes it."""
    return datetime.now(UTC).isoformat()


def user(ident: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A user object."""
    return {
        "id": str(ident),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
        "flags": 0,
    }


def application(owner: dict[str, Any]) -> dict[str, Any]:
    """``GET /oauth2/applications/@me``."""
    return {
        "id": str(APPLICATION_ID),
        "name": "Persona Bot",
        "icon": None,
        "description": "",
        "bot_public": True,
        "bot_require_code_grant": False,
        "owner": owner,
        "verify_key": "0" * 64,
        "flags": 0,
        "summary": "",
        "team": None,
    }


def channel(ident: int, name: str, *, guild_id: int | None = GUILD_ID) -> dict[str, Any]:
    """A text channel of the guild (a DM channel without ``guild_id``)."""
    if guild_id is None:
        return {"id": str(ident), "type": 1, "recipients": [], "last_message_id": None}
    return {
        "id": str(ident),
        "type": 0,
        "guild_id": str(guild_id),
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
    }


def guild(channels: list[dict[str, Any]], members: list[dict[str, Any]]) -> dict[str, Any]:
    """``GUILD_CREATE``: the guild, its channels and the members the fake knows."""
    return {
        "id": str(GUILD_ID),
        "name": "Persona Test Guild",
        "icon": None,
        "owner_id": members[0]["user"]["id"] if members else str(BOT_ID),
        "roles": [
            {
                "id": str(GUILD_ID),
                "name": "@everyone",
                "permissions": "137411140505153",
                "position": 0,
                "color": 0,
                "hoist": False,
                "managed": False,
                "mentionable": False,
                "flags": 0,
            }
        ],
        "emojis": [],
        "stickers": [],
        "features": [],
        "member_count": len(members),
        "members": members,
        "channels": channels,
        "threads": [],
        "presences": [],
        "voice_states": [],
        "large": False,
        "unavailable": False,
        "joined_at": now(),
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "nsfw_level": 0,
    }


def member(person: dict[str, Any]) -> dict[str, Any]:
    """A guild member object."""
    return {
        "user": person,
        "roles": [],
        "joined_at": now(),
        "deaf": False,
        "mute": False,
        "flags": 0,
    }


def message(
    ident: int,
    channel_id: int,
    author: dict[str, Any],
    content: str,
    *,
    guild_id: int | None = None,
    mentions: list[dict[str, Any]] | None = None,
    referenced: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A message object (``MESSAGE_CREATE``'s, or a REST answer's)."""
    data: dict[str, Any] = {
        "id": str(ident),
        "channel_id": str(channel_id),
        "author": author,
        "content": content,
        "timestamp": now(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 19 if referenced else 0,
        "flags": 0,
        "components": [],
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
        data["member"] = {k: v for k, v in member(author).items() if k != "user"}
    if referenced is not None:
        data["message_reference"] = {
            "message_id": referenced["id"],
            "channel_id": str(channel_id),
            **({"guild_id": str(guild_id)} if guild_id else {}),
        }
        data["referenced_message"] = referenced
    return data


def interaction(
    ident: int,
    token: str,
    command: dict[str, Any],
    options: dict[str, str],
    person: dict[str, Any],
    channel_id: int,
    guild_id: int | None,
) -> dict[str, Any]:
    """``INTERACTION_CREATE`` of a slash command (type 2) with string options."""
    data: dict[str, Any] = {
        "id": str(ident),
        "application_id": str(APPLICATION_ID),
        "type": 2,
        "token": token,
        "version": 1,
        "channel_id": str(channel_id),
        "channel": {"id": str(channel_id), "type": 1 if guild_id is None else 0},
        "locale": "en-US",
        "app_permissions": "0",
        "attachment_size_limit": 8_388_608,
        "entitlements": [],
        "authorizing_integration_owners": {},
        "context": 0 if guild_id is not None else 1,
        "data": {
            "id": command["id"],
            "name": command["name"],
            "type": 1,
            "options": [{"name": k, "type": 3, "value": v} for k, v in options.items()],
        },
    }
    if guild_id is None:
        data["user"] = person
    else:
        data["guild_id"] = str(guild_id)
        data["guild_locale"] = "en-US"
        data["member"] = {**member(person), "permissions": "0"}
    return data
