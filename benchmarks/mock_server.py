"""The project's mock server in its own process (``python -m benchmarks.mock_server``).

Prints ``PORT <n>`` once it listens; stops when standard input closes and prints its CPU seconds.
"""

from __future__ import annotations

import json
import sys
import time

from generic_framework.mock import MockServer


def main() -> None:
    """Serve the bundled fixtures (or the fixture file given as the first argument)."""
    fixtures = sys.argv[1] if len(sys.argv) > 1 else None
    with MockServer(fixtures) as server:
        print(f"PORT {server.port}", flush=True)
        sys.stdin.read()  # until the harness closes our standard input
    print(json.dumps({"cpu_s": time.process_time()}), flush=True)


if __name__ == "__main__":
    main()
