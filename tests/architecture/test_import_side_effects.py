"""Importing generic_framework changes no other package's modules (docs/design/0704).

In a fresh interpreter: import the package and every public name, then look at ``sys.modules``.
Each module of another package must be the one the file system gives for its name (its
``__spec__`` names the file Python's own path finder finds), none may come from a file inside
generic_framework, and a module imported before the package must still be the same object
afterwards. A stand-in module (as the CLI puts in place of httpx's command line) fails all
three: it has no spec, or one that points elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_PROBE = r"""
import importlib, importlib.machinery, json, os, sys

for name in sys.argv[1:]:
    if name == "--run-the-command":  # the console script's entry point, run to its end
        import contextlib, io
        from generic_framework.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["--version"])
        continue
    importlib.import_module(name)


def origin(module):
    spec = getattr(module, "__spec__", None)
    return None if spec is None else spec.origin


before = {name: (id(m), origin(m)) for name, m in list(sys.modules.items())}

import generic_framework
for name in generic_framework.__all__:
    getattr(generic_framework, name)

ours = os.path.dirname(os.path.abspath(generic_framework.__file__)) + os.sep
problems = []
for name, module in sorted(sys.modules.items()):
    if name == "generic_framework" or name.startswith("generic_framework.") or name == "__main__":
        continue
    if name in before and before[name] != (id(module), origin(module)):
        problems.append(f"{name}: replaced after the import")
    spec = getattr(module, "__spec__", None)
    if spec is None:
        # typing makes typing.io and typing.re itself; anything else without a spec is made up
        if name.partition(".")[0] not in sys.stdlib_module_names:
            problems.append(f"{name}: no __spec__ (a stand-in?)")
        continue
    paths = [p for p in (spec.origin, getattr(module, "__file__", None)) if p]
    if any(os.path.abspath(p).startswith(ours) for p in paths):
        problems.append(f"{name}: its code is inside generic_framework")
    if not (spec.origin and os.path.isabs(spec.origin)):
        continue  # built-in, frozen, namespace packages
    parent, _, _ = name.rpartition(".")
    search = getattr(sys.modules.get(parent), "__path__", None) if parent else None
    found = importlib.machinery.PathFinder.find_spec(name, search)
    if found is None or found.origin != spec.origin:
        problems.append(f"{name}: not the module the path finder gives ({spec.origin})")
print(json.dumps({"problems": problems, "modules": len(sys.modules)}))
"""


def _problems(*imported_first: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *imported_first],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["modules"] > 100  # the probe really imported the package
    problems: list[str] = result["problems"]
    return problems


def test_importing_the_package_leaves_every_other_module_as_its_package_made_it() -> None:
    assert _problems() == []


@pytest.mark.parametrize("first", ["httpx", "pydantic"])
def test_modules_imported_before_the_package_are_left_alone(first: str) -> None:
    assert _problems(first) == []


def test_importing_the_command_line_module_changes_nothing_either() -> None:
    # The stand-in for httpx's command line belongs to the command's process: importing the
    # module that declares the command (as the console script does) must not put it in place.
    assert _problems("generic_framework.cli") == []
    assert _problems("generic_framework.cli", "httpx") == []


def test_the_probe_sees_a_stand_in() -> None:
    # What the CLI's entry point does to httpx when it runs: the same probe must report it.
    problems = _problems("--run-the-command", "httpx")
    assert "httpx._main: no __spec__ (a stand-in?)" in problems
