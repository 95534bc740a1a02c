"""Reliability tests: the helpers of the mock and service tests are imported, not copied."""

from __future__ import annotations

import helper_paths  # noqa: F401  (puts tests/mock and tests/service on sys.path)
