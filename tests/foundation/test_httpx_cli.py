"""The deferred httpx command line (cli/_httpx_cli.py): pinned to httpx's code.

The stand-in relies on one line of httpx's ``__init__`` (``from ._main import main``). These
tests fail loudly when httpx changes: a new version must be read again and added to
``HTTPX_VERSIONS_CHECKED`` (docs/design/0704).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from generic_framework.cli._httpx_cli import HTTPX_VERSIONS_CHECKED


def test_httpx_is_a_version_the_stand_in_was_checked_against() -> None:
    assert httpx.__version__ in HTTPX_VERSIONS_CHECKED, (
        f"httpx {httpx.__version__} is not in HTTPX_VERSIONS_CHECKED: read its __init__.py, "
        "check that it still imports main from httpx._main, then add the version"
    )


def test_httpx_still_imports_its_command_line_from_main() -> None:
    source = (Path(httpx.__file__).parent / "__init__.py").read_text(encoding="utf-8")

    assert "from ._main import main" in source


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_ENTRY_POINT = (
    "import contextlib, io\n"
    "from generic_framework.cli import main\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    main(['--version'])\n"
)


def test_the_command_s_entry_point_then_httpx_loads_no_command_line() -> None:
    code = _ENTRY_POINT + (
        "import json, sys, httpx\n"
        "print(json.dumps({m: m in sys.modules for m in ('click', 'rich', 'pygments')}))"
    )
    assert _run(code) == {"click": False, "rich": False, "pygments": False}


def test_the_command_line_and_its_module_still_work_when_used() -> None:
    code = _ENTRY_POINT + (
        "import contextlib, io, json, sys, httpx\n"
        "from httpx._main import print_response\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    httpx.main(['--help'])\n"
        "print(json.dumps({'usage': 'Usage: httpx' in out.getvalue(),"
        " 'real': callable(print_response), 'name': httpx.main.name}))"
    )
    assert _run(code) == {"usage": True, "real": True, "name": "main"}


def test_importing_the_command_s_module_alone_puts_no_stand_in() -> None:
    code = (
        "import json, sys, generic_framework.cli, httpx\n"
        "print(json.dumps({'click': 'click' in sys.modules,"
        " 'stand_in': hasattr(sys.modules['httpx._main'], '_stand_in')}))"
    )
    assert _run(code) == {"click": True, "stand_in": False}


def test_nothing_changes_when_httpx_was_imported_first() -> None:
    code = (
        "import json, sys, httpx\n"
        + _ENTRY_POINT
        + "print(json.dumps({'click': 'click' in sys.modules}))"
    )
    assert _run(code) == {"click": True}
