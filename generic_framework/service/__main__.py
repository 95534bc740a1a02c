"""``python -m generic_framework.service [--host H] [--port P]``: the CLI's ``serve`` command."""

import sys

from generic_framework.cli import main

main(["serve", *sys.argv[1:]])
