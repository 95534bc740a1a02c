"""Two rules of the test suite itself, which a quiet machine or a single folder would not show:

- **No test imports ``conftest`` by name.** Every folder's ``conftest.py`` is the module
  ``conftest`` on ``sys.path``, so ``from conftest import x`` gets whichever folder's was
  imported first: ``pytest tests/service tests/cli`` failed to collect. What tests share lives
  in a module of its own name (``support``, ``telemetry_support``, ``service_fakes``...).
- **Every httpx request to a test's own server names its timeout.** httpx's default is 5 s,
  a quiet machine's budget: on a loaded one a server of the test may take longer to answer,
  and the test would fail on the machine's speed rather than on what it checks. A client on
  an in-process transport (``transport=``) has no network wait and needs none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HTTPX_CALLS = {"get", "post", "put", "patch", "delete", "head", "options", "request", "stream"}
HTTPX_CLIENTS = {"Client", "AsyncClient"}


def _trees() -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(TESTS.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def conftest_imports(tree: ast.AST) -> list[int]:
    """Lines of ``import conftest`` and ``from conftest import ...``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if "conftest" in names:
            lines.append(node.lineno)
    return lines


def untimed_requests(tree: ast.AST) -> list[int]:
    """Lines of ``httpx.<verb>(...)`` and ``httpx.Client(...)`` calls without ``timeout=``
    (a ``**options`` argument may carry it; a client on an in-process transport needs none)."""
    lines = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "httpx"
            and node.func.attr in HTTPX_CALLS | HTTPX_CLIENTS
        ):
            continue
        named = {keyword.arg for keyword in node.keywords}
        if "timeout" in named or None in named:
            continue
        if node.func.attr in HTTPX_CLIENTS and "transport" in named:
            continue
        lines.append(node.lineno)
    return lines


def test_no_test_imports_a_conftest_by_name() -> None:
    found = [f"{p.relative_to(TESTS)}:{n}" for p, tree in _trees() for n in conftest_imports(tree)]
    assert found == [], "move what is shared into a module of its own name"


def test_every_httpx_request_names_its_timeout() -> None:
    found = [f"{p.relative_to(TESTS)}:{n}" for p, tree in _trees() for n in untimed_requests(tree)]
    assert found == [], "httpx's 5 s default is a quiet machine's budget: name the timeout"


def test_the_checks_find_what_they_forbid() -> None:
    tree = ast.parse(
        "from conftest import x\n"
        "import conftest\n"
        "httpx.get(url)\n"
        "httpx.AsyncClient(base_url=url)\n"
        "httpx.post(url, timeout=30)\n"
        "httpx.AsyncClient(transport=app)\n"
        "httpx.get(url, **options)\n"
    )
    assert conftest_imports(tree) == [1, 2]
    assert untimed_requests(tree) == [3, 4]
