"""No module of the package or of the benchmark harness is over 500 lines.

A module that long holds more than one idea; it is split along a seam (a group of functions or
classes that reads well on its own, with a docstring saying why it is apart), never cut in the
middle. The few modules still over the limit are listed in :data:`ALLOWED_OVER`, each with its
length when it was listed as a ceiling: they may shrink, never grow, and an entry goes once its
module fits. (The benchmark harness keeps its own, lower limit: ``test_layout.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("generic_framework", "benchmarks")
MODULE_LINES = 500

ALLOWED_OVER: dict[str, int] = {}
"""Modules still allowed over :data:`MODULE_LINES`, each with its ceiling (its length when
listed)."""


def line_count(path: Path) -> int:
    """The module's lines, as ``wc -l`` counts them for a file ending in a newline."""
    return len(path.read_text(encoding="utf-8").splitlines())


def too_long(
    repo: Path, roots: tuple[str, ...], limit: int, allowed: dict[str, int]
) -> dict[str, str]:
    """Every module under ``roots`` over ``limit`` lines (or over its ceiling in ``allowed``),
    and every entry of ``allowed`` whose module is gone or fits now: path -> what is wrong."""
    problems: dict[str, str] = {}
    seen: set[str] = set()
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            name = path.relative_to(repo).as_posix()
            lines = line_count(path)
            ceiling = allowed.get(name, limit)
            seen.add(name)
            if lines > ceiling:
                problems[name] = f"{lines} lines, over {ceiling}: split it along a seam"
            elif name in allowed and lines <= limit:
                problems[name] = f"{lines} lines, fits now: drop it from ALLOWED_OVER"
    for name in sorted(set(allowed) - seen):
        problems[name] = "no such module: drop it from ALLOWED_OVER"
    return problems


def test_no_module_is_over_500_lines() -> None:
    assert too_long(REPO, ROOTS, MODULE_LINES, ALLOWED_OVER) == {}


@pytest.mark.parametrize(
    ("lines", "allowed", "expected"),
    [
        (500, {}, {}),
        (501, {}, {"pkg/big.py": "501 lines, over 500: split it along a seam"}),
        (510, {"pkg/big.py": 510}, {}),
        (511, {"pkg/big.py": 510}, {"pkg/big.py": "511 lines, over 510: split it along a seam"}),
        (
            500,
            {"pkg/big.py": 510},
            {"pkg/big.py": "500 lines, fits now: drop it from ALLOWED_OVER"},
        ),
        (
            10,
            {"pkg/gone.py": 600},
            {"pkg/gone.py": "no such module: drop it from ALLOWED_OVER"},
        ),
    ],
)
def test_the_size_check_finds_a_module_too_long(
    tmp_path: Path, lines: int, allowed: dict[str, int], expected: dict[str, str]
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "big.py").write_text("x = 1\n" * lines, encoding="utf-8")
    assert too_long(tmp_path, ("pkg",), 500, allowed) == expected
