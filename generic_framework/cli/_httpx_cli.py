"""The ``generic-framework`` command's httpx, without httpx's own command-line client.

httpx's ``__init__`` ends with ``from ._main import main`` (the ``httpx`` console command). When
click, rich and pygments are installed, which they are wherever generic_framework's CLI is
(rich and typer are its dependencies), that line imports all three, for a command the
``generic-framework`` command never runs.

:func:`defer_httpx_cli` runs when the ``generic-framework`` command starts (the first line of
:func:`generic_framework.cli.main`, the process's entry point), before anything the command runs
imports httpx. Importing the library, :mod:`generic_framework.cli` included, never calls it: a
library changes no other package's modules (docs/design/0704). If httpx is not imported yet, it
puts a stand-in module in ``sys.modules`` under ``httpx._main``; httpx's import then takes
``main`` from it: a proxy that imports the real module when it is called or inspected. Any other
name read from the stand-in loads the real module too (module ``__getattr__``), so
``httpx.main(...)`` and ``from httpx._main import ...`` keep working, only later. Nothing
happens when httpx was imported first.

This depends on one line of httpx's ``__init__``. ``tests/foundation/test_httpx_cli.py`` pins
the httpx versions it was checked against and that line, and fails loudly when either changes
(docs/design/0704).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["HTTPX_VERSIONS_CHECKED", "defer_httpx_cli"]

HTTPX_VERSIONS_CHECKED = ("0.28.1",)
"""httpx versions whose ``__init__`` was read to imports ``main`` from ``httpx._main``."""

_NAME = "httpx._main"


class _LazyMain:
    """Stands for ``httpx._main.main`` (a click command) until it is called or inspected."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _real().main(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_real().main, name)

    def __repr__(self) -> str:
        return "<httpx command line, loaded on first use>"


def _real() -> types.ModuleType:
    """The real ``httpx._main``, imported now if the stand-in is still in its place."""
    module = sys.modules.get(_NAME)
    if module is None or getattr(module, "_stand_in", False):
        sys.modules.pop(_NAME, None)
        module = importlib.import_module(_NAME)
    return module


def _attribute(name: str) -> Any:
    """Module ``__getattr__`` of the stand-in: any other name comes from the real module."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_real(), name)


def defer_httpx_cli() -> None:
    """Put the stand-in for ``httpx._main`` in place, unless httpx is already imported."""
    if "httpx" in sys.modules or _NAME in sys.modules:
        return
    stand_in = types.ModuleType(_NAME, "Stand-in for httpx's command line (generic-framework).")
    stand_in.__dict__.update(main=_LazyMain(), _stand_in=True, __getattr__=_attribute)
    sys.modules[_NAME] = stand_in
