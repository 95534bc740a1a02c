"""Reading a settings model's variables out of the environment, by one set of rules.

:class:`~generic_framework.config.Settings` and the chat platforms' own settings (Telegram's)
read the environment through :func:`environment_values`, so a variable means the same wherever
it is read: names match case-insensitively, an empty variable counts as unset, aliases are
tried in order, and a structured field is read as JSON. A secret (a ``SecretStr`` field: keys,
tokens, ``DATABASE_URL``) may instead come from a file named by ``NAME_FILE``, as orchestrators
mount secrets (``/run/secrets/...``): the file's text without its trailing newline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_args, get_origin

from pydantic import AliasChoices, BaseModel, SecretStr

from generic_framework.errors import ConfigError

__all__ = ["environment_values"]


def environment_values(model: type[BaseModel], environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields' values found in ``environ``, keyed as the model validates them.

    Names match case-insensitively; a field with aliases (``OPENAI_API_KEY``, ``ZAI_API_KEY``)
    takes the first alias that is set, and never its field name (a generic ``API_KEY`` is not
    ours); an empty variable counts as unset; a field of a structured type (list, dict, a
    model...) is read as JSON. A plain pydantic model over ``os.environ`` instead of
    pydantic-settings, whose sources load eagerly at import (docs/design/0704).
    """
    found = {name.lower(): value for name, value in environ.items() if value != ""}
    values: dict[str, Any] = {}
    for field, info in model.model_fields.items():
        alias = info.validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [alias or field]
        secret = SecretStr in (info.annotation, *get_args(info.annotation))
        for name in names:
            value = found.get(str(name).lower())
            if secret:
                value = _from_file(str(name), value, found.get(f"{name}_file".lower()))
            if value is not None:
                values[str(name)] = _decoded(value, info.annotation)
                break
    return values


def _decoded(value: str, annotation: Any) -> Any:
    """``value`` as JSON when the field is structured (pydantic-settings' rule), else as is."""
    kinds = [annotation, *get_args(annotation)]
    structured = any(
        get_origin(kind) in {list, dict, set, tuple, frozenset}
        or (isinstance(kind, type) and issubclass(kind, BaseModel | list | dict | set | tuple))
        for kind in kinds
    )
    if not structured:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # the model's validation names the field and the value


def _from_file(name: str, value: str | None, path: str | None) -> str | None:
    """``value``, or the text of the file ``NAME_FILE`` names (never both)."""
    if path is None:
        return value
    variable = f"{name.upper()}_FILE"
    if value is not None:
        raise ConfigError(f"both {name.upper()} and {variable} are set: keep one")
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{variable}: cannot read {path!r} ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    text = text.removesuffix("\n").removesuffix("\r")
    return text or None
