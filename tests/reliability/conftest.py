"""Reliability tests: the helpers of the mock, service and persona tests are imported, not copied.

pytest puts only this folder on ``sys.path``; the sibling folders whose helper modules these
tests reuse (``mock_helpers``, ``fixture_parts``, ``service_processes``...) are added here.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for _folder in ("mock", "service"):
    _path = str(TESTS / _folder)
    if _path not in sys.path:
        sys.path.append(_path)
