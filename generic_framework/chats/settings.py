"""The settings of a chat platform, read from the environment by the rules of ``Settings``.

A model of its own per platform (``TELEGRAM_*``, ``DISCORD_*``) beside
:class:`~generic_framework.config.Settings` (which every program reads, and which stays about
the library): a platform's command and ``serve`` read it where they read their settings, after
``.env`` (docs/design/0307). Names match case-insensitively, an empty variable counts as unset,
an invalid value is a :class:`ConfigError` naming the variable (a secret's value never shown).
:class:`PlatformSettings` is what they share; a platform declares its fields, its
:attr:`~PlatformSettings.secret_fields` and its validators.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, field_validator

from generic_framework.environment import environment_values
from generic_framework.errors import ConfigError
from generic_framework.limits import wording
from generic_framework.redaction import redact, register_secret

__all__ = ["PlatformSettings"]


class PlatformSettings(BaseModel):
    """A platform's variables (see the module's docstring)."""

    model_config = ConfigDict(extra="ignore", validate_default=True)
    secret_fields: ClassVar[frozenset[str]] = frozenset()
    """The fields that are secrets (``SecretStr``): stripped, never shown, redacted."""

    def __init__(self, **values: Any) -> None:
        self._read(values, environment_values(type(self), os.environ))

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Self:
        """Settings from ``environ`` (the rules of the environment's reading)."""
        settings = cls.__new__(cls)
        settings._read({}, environment_values(cls, environ))
        return settings

    @classmethod
    def defaults(cls, **values: Any) -> Self:
        """Settings from ``values`` and the defaults only (the environment is not read)."""
        settings = cls.__new__(cls)
        settings._read(values, {})
        return settings

    def _read(self, values: dict[str, Any], environment: Mapping[str, Any]) -> None:
        try:
            super().__init__(**{**environment, **values})
        except ValidationError as exc:
            raise ConfigError(redact(self._explain(exc))) from None

    @field_validator("*", mode="before")
    @classmethod
    def _strip_secret(cls, value: Any, info: Any) -> Any:
        if info.field_name in cls.secret_fields and isinstance(value, str):
            return value.strip() or None
        return value

    def register_secrets(self) -> None:
        """Have :func:`~generic_framework.redaction.redact` remove every secret from any text
        (entry points call it once the settings are read)."""
        for name in self.secret_fields:
            secret = getattr(self, name)
            if isinstance(secret, SecretStr):
                register_secret(secret.get_secret_value())

    @classmethod
    def _explain(cls, exc: ValidationError) -> str:
        lines = []
        for err in exc.errors():
            field = str(err["loc"][0]).lower() if err["loc"] else "settings"
            got = "" if field in cls.secret_fields else f" (got {err.get('input')!r})"
            lines.append(f"{field.upper()} {wording(err)}{got}")
        return "; ".join(lines)
