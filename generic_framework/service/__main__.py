"""``python -m generic_framework.service [--host H] [--port P]``: the service without the CLI.

Reads ``.env`` like the CLI does, then :func:`generic_framework.service.run`. Prints
``error: ...`` and exits with status 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import sys

from generic_framework.config import Settings, load_dotenv
from generic_framework.service.server import run
from generic_framework.wire.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m generic_framework.service")
    parser.add_argument("--host", default=None, help="interface to bind (BOT_HOST)")
    parser.add_argument("--port", type=int, default=None, help="port (BOT_PORT; 0 = any)")
    args = parser.parse_args(argv)
    load_dotenv()
    try:
        run(Settings(), args.host, args.port)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
