"""``python -m generic_framework`` runs the CLI."""

from generic_framework.cli import main

main()
