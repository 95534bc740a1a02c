"""The public API is one list: ``_EXPORTS`` in generic_framework/__init__.py.

``__all__`` is made from it; the ``TYPE_CHECKING`` imports repeat it for type checkers and must
say the same names from the same modules, as explicit re-exports (``name as name``). Every name
resolves to the object its module defines, and every public error class of the library's
modules can be caught by importing it from the package (docs/design/0704).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import generic_framework

INIT = Path(generic_framework.__file__)

APPLICATIONS = ("cli", "mock", "recording", "service")
"""Subpackages that are programs built on the library, not its API: their errors (the mock's
``FixtureError``, the service's ``ServiceError``) are answered by those programs themselves."""


def _type_checking_imports() -> list[tuple[str, str, str | None]]:
    """(module, name, alias) of every import in the ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    blocks = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    assert len(blocks) == 1, "one TYPE_CHECKING block"
    found = []
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom), ast.unparse(node)
        found += [(str(node.module), alias.name, alias.asname) for alias in node.names]
    return found


def _lazy_table() -> dict[str, str]:
    """``_EXPORTS`` as the file writes it (read with ast, not imported)."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "_EXPORTS":
            table: dict[str, str] = ast.literal_eval(node.value)  # type: ignore[arg-type]
            return table
    raise AssertionError("no _EXPORTS table")


def test_the_type_checking_imports_say_what_the_lazy_table_says() -> None:
    imports = _type_checking_imports()
    assert {name: module for module, name, _ in imports} == _lazy_table()
    assert len(imports) == len(_lazy_table())


def test_the_type_checking_imports_are_explicit_re_exports() -> None:
    # Without "as name", a strict type checker sees no re-export (``__all__`` is computed).
    assert [name for _, name, alias in _type_checking_imports() if alias != name] == []


def test_all_is_the_lazy_table_and_the_version() -> None:
    table = _lazy_table()
    assert generic_framework.__all__ == [*table, "__version__"]
    assert list(table) == sorted(table)
    assert dir(generic_framework) == sorted(generic_framework.__all__)


def test_every_exported_name_resolves_to_its_module_s_object() -> None:
    for name, module in _lazy_table().items():
        value = getattr(generic_framework, name)
        assert value is getattr(importlib.import_module(module), name), name


def test_a_star_import_gives_every_name_in_a_fresh_process() -> None:
    code = (
        "import generic_framework\n"
        "from generic_framework import *\n"
        "missing = [n for n in generic_framework.__all__ if n not in globals()]\n"
        "assert missing == [], missing\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def _library_modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages([str(INIT.parent)], prefix="generic_framework."):
        parts = info.name.split(".")
        if parts[1] not in APPLICATIONS and parts[-1] != "__main__":  # __main__ runs the CLI
            found.append(info.name)
    return found


def _public_errors(module_name: str) -> set[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
    return {
        name
        for name in names
        if isinstance(value := getattr(module, name, None), type)
        and issubclass(value, BaseException)
        and value.__module__.startswith("generic_framework.")
    }


def test_every_public_error_class_of_the_library_is_exported() -> None:
    errors = set().union(*(_public_errors(m) for m in _library_modules()))
    assert {"StoreUnavailableError", "UpstreamBusyError", "ToolError"} <= errors
    assert errors - set(generic_framework.__all__) == set()
