"""A turn asked by a signed-in user: the upstream request carries the user's pseudonym as
``user_id`` (never the name), and the stored record keeps the user and key ids."""

from __future__ import annotations

from collections.abc import Callable

from zai_script import Script, completion

from generic_framework.config import Settings
from generic_framework.core.persona import Persona
from generic_framework.runtime import Runtime
from generic_framework.store.users import ApiKey, Caller, User, conversation_key, pseudonym
from generic_framework.wire.client import GLMClient

ALICE = User("u0123456789ab", "alice@example.org", "user")
KEY = ApiKey("fedcba987654", ALICE.id, "2026-11-26T00:00:00.000+00:00")


async def test_the_callers_pseudonym_goes_upstream_and_their_ids_are_stored(
    settings: Settings,
    script: Callable[..., Script],
    client_for: Callable[[Script], GLMClient],
) -> None:
    s = script(completion("Hello."), completion("Again."))
    async with Runtime(settings, client=client_for(s)) as runtime:
        persona = Persona("tester", "You test.", runtime=runtime)
        key = conversation_key(ALICE.id, "chat-1")
        await persona.respond("hi", conversation_id=key, caller=Caller(ALICE, KEY, "key"))
        await persona.respond("hi again")  # no caller: no user_id, as before
        turns = await runtime.store.turns(key)
    first, second = s.requests
    assert first["user_id"] == pseudonym(ALICE.id)
    assert first["user_id"].startswith("gf-") and 6 <= len(first["user_id"]) <= 128
    assert "alice" not in first["user_id"] and ALICE.id not in first["user_id"]
    assert "user_id" not in second
    assert turns is not None and turns[0].record is not None
    assert (turns[0].record.user_id, turns[0].record.key_id) == (ALICE.id, KEY.id)


def test_the_pseudonym_is_stable_and_differs_per_user() -> None:
    assert pseudonym("u0123456789ab") == pseudonym("u0123456789ab")
    assert pseudonym("u0123456789ab") != pseudonym("u0123456789ac")


async def test_a_client_user_field_names_end_users_only_for_the_bootstrap_admin(
    settings: Settings,
    script: Callable[..., Script],
    client_for: Callable[[Script], GLMClient],
) -> None:
    from generic_framework.core.options import TurnOptions
    from generic_framework.store.users import BOOTSTRAP_USER

    admin = User(BOOTSTRAP_USER, BOOTSTRAP_USER, "admin")
    end_user = TurnOptions(user_id="u-" + "ab" * 20)  # the client's `user`, already hashed
    s = script(completion("One."), completion("Two."), completion("Three."))
    async with Runtime(settings, client=client_for(s)) as runtime:
        persona = Persona("tester", "You test.", runtime=runtime)
        # An application behind BOT_API_TOKEN names its own end users ...
        await persona.respond("hi", options=end_user, caller=Caller(admin, None, "token"))
        # ... and without a `user` field the admin's own pseudonym goes;
        await persona.respond("hi", caller=Caller(admin, None, "token"))
        # a user with their own key cannot pass their calls off as someone else's.
        await persona.respond("hi", options=end_user, caller=Caller(ALICE, KEY, "key"))
    first, second, third = s.requests
    assert first["user_id"] == end_user.user_id
    assert second["user_id"] == pseudonym(BOOTSTRAP_USER)
    assert third["user_id"] == pseudonym(ALICE.id)
