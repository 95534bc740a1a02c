"""The CLI package's shape: an acyclic import graph, and personas only from a Runtime."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import generic_framework.cli

PACKAGE = Path(generic_framework.cli.__file__).parent
PREFIX = "generic_framework.cli"


def _module_name(path: Path) -> str:
    return PREFIX if path.stem == "__init__" else f"{PREFIX}.{path.stem}"


def _imports(path: Path) -> set[str]:
    """The CLI modules ``path`` imports, deferred imports included."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith(f"{PREFIX}."))
    return found


def test_the_cli_modules_import_each_other_without_cycles() -> None:
    graph = {_module_name(p): _imports(p) for p in PACKAGE.glob("*.py")}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:  # pragma: no cover - the failure message
        raise AssertionError(f"import cycle in the CLI: {exc.args[1]}") from None
    assert f"{PREFIX}.common" in order
    # Only the entry module may import the commands; nothing imports the entry module.
    assert not any(PREFIX in deps for deps in graph.values())


def test_the_cli_constructs_no_client_or_store() -> None:
    for path in PACKAGE.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        for name in ("GLMClient", "SQLiteStore", "load_personas", "load_persona("):
            assert name not in source, f"{path.name} uses {name}; take it from a Runtime"


def test_exit_codes_are_defined_once() -> None:
    definitions = [
        path.name
        for path in PACKAGE.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.startswith("EXIT_")
    ]
    assert definitions == ["common.py"] * 3
