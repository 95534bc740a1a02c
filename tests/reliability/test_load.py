"""The load run at CI size: 50 conversations for 15 s (``load.py`` runs the full 200 x 60 s).

Mock latency 50 ms and 5 % injected 503s as in the full run; the checks are the same (no lost
turn, stored in order, valid histories, no 5xx but exhausted retries), plus a bound on memory
growth. The figures are printed; ``pytest -s`` shows them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from load import LoadConfig, render, run_load

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RSS_GROWTH_MB = 64.0


async def test_load_at_ci_size(tmp_path: Path) -> None:
    result = await run_load(LoadConfig(conversations=50, seconds=15), tmp_path)
    print("\n" + render(result))
    assert result.ok, result.problems
    assert result.acknowledged > 200
    assert result.mock["injected"] > 0
    assert result.rss_mb["end"] - result.rss_mb["after_warm_up"] < RSS_GROWTH_MB
