"""Puts the sibling test folders whose helper modules these tests reuse on ``sys.path``.

pytest adds only this folder (``rootdir``-relative imports, no packages); the scripts of this
folder are run directly. Importing this module first makes ``mock_helpers``, ``fixture_parts``,
``service_processes`` and ``postgres_server`` importable in both cases.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for _folder in ("mock", "service", "."):
    _path = str(TESTS / _folder)
    if _path not in sys.path:
        sys.path.append(_path)
