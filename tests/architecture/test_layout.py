"""The package's shape: no import circles, small functions, the layers where they belong.

The benchmark harness (benchmarks/) keeps the same rules for circles, function size and
complexity, stays small module by module, and the package never imports it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "generic_framework"
ROOT = "generic_framework"
HARNESS = "benchmarks"
HARNESS_MODULE_LINES = 400


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / root).rglob("*.py"))}


MODULES = _modules(ROOT)
HARNESS_MODULES = _modules(HARNESS)
TREES = {ROOT: MODULES, HARNESS: HARNESS_MODULES}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (type-only imports)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                inside.update(id(n) for n in ast.walk(child))
    return inside


def _targets(
    module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path] = MODULES
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".")[: len(module.split(".")) - node.level + 1]
            if module in modules and modules[module].name != "__init__.py":
                package = module.split(".")[: -node.level]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{alias.name}" for alias in node.names] + [base]
    for name in names:
        known = name
        while known and known not in modules:
            known = known.rpartition(".")[0]
        if known:
            yield known


def import_graph(root: str = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of its own tree it imports anywhere (deferred imports included)."""
    modules = TREES[root]
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_nodes(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skip:
                edges.update(t for t in _targets(module, node, modules) if t != module)
        # A package's __init__ is the package itself, imported before any of its modules:
        # an edge to an ancestor package that only re-exports is not a dependency back.
        graph[module] = {e for e in edges if not module.startswith(e + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("root", [ROOT, HARNESS])
def test_no_module_imports_another_in_a_circle(root: str) -> None:
    assert cycles(import_graph(root)) == []


def test_the_package_never_imports_the_benchmark_harness() -> None:
    harness = {"benchmarks", *HARNESS_MODULES}
    found = {
        (module, target)
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for target in _targets(module, node, {**MODULES, **HARNESS_MODULES})
        if target in harness
    }
    assert found == set()


def test_no_benchmark_module_is_over_400_lines() -> None:
    long = {
        module: lines
        for module, path in HARNESS_MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > HARNESS_MODULE_LINES
    }
    assert long == {}


def test_the_cycle_finder_finds_a_deferred_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("generic_framework.wire", ("core", "service", "cli", "mock", "recording", "runtime")),
        ("generic_framework.mock", ("core", "service", "cli", "recording", "runtime")),
        ("generic_framework.store", ("core", "service", "cli", "mock", "recording", "runtime")),
        ("generic_framework.core", ("service", "cli", "mock", "recording", "runtime")),
        # Telemetry is reported to from every layer, so it sits below all of them (it may use
        # the redaction helper of wire/errors.py only: see the next test).
        (
            "generic_framework.telemetry",
            ("core", "service", "cli", "mock", "recording", "runtime", "store", "tools"),
        ),
        (
            "generic_framework.mcp_tools",
            ("core", "service", "cli", "mock", "recording", "runtime"),
        ),
    ],
)
def test_lower_layers_do_not_import_higher_ones(layer: str, forbidden: tuple[str, ...]) -> None:
    graph = import_graph()
    bad = {
        (module, target)
        for module, targets in graph.items()
        if module == layer or module.startswith(layer + ".")
        for target in targets
        if any(target.startswith(f"{ROOT}.{name}") for name in forbidden)
    }
    assert bad == set()


def test_telemetry_uses_only_the_redaction_helper_of_the_wire_layer() -> None:
    graph = import_graph()
    wire = {
        target
        for module, targets in graph.items()
        if module.startswith("generic_framework.telemetry")
        for target in targets
        if target.startswith("generic_framework.wire")
    }
    assert wire <= {"generic_framework.wire.errors"}


def test_the_wire_layer_reports_to_telemetry_through_a_protocol_only() -> None:
    # The client knows an observer protocol, not Prometheus: wire imports nothing of telemetry.
    graph = import_graph()
    assert not {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("generic_framework.wire")
        for target in targets
        if target.startswith("generic_framework.telemetry")
    }


def _functions(root: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for module, path in TREES[root].items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield module, node


@pytest.mark.parametrize("root", [ROOT, HARNESS])
def test_no_function_is_over_50_lines(root: str) -> None:
    long = [
        f"{module}.{node.name}: {node.end_lineno - node.lineno + 1} lines"  # type: ignore[operator]
        for module, node in _functions(root)
        if node.end_lineno is not None and node.end_lineno - node.lineno + 1 > 50
    ]
    assert long == []


@pytest.mark.parametrize("root", [ROOT, HARNESS])
def test_no_function_is_over_complexity_12(root: str) -> None:
    radon = pytest.importorskip("radon.complexity")
    complex_ = []
    for module, path in TREES[root].items():
        for block in radon.cc_visit(path.read_text(encoding="utf-8")):
            items = [block, *getattr(block, "methods", [])]
            complex_ += [f"{module}.{b.name}: {b.complexity}" for b in items if b.complexity > 12]
    assert complex_ == []
