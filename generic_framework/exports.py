"""A package's names loaded on first use (PEP 562), the one way the packages here do it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["on_first_use"]


def on_first_use(
    package: str, exports: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``exports`` (name -> module) is
    imported from its module when first asked for, then kept in ``namespace`` (the package's
    ``globals()``), so later lookups do not come here."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
