"""Set values in ``.env`` in place: ``make env KEY=VALUE ...`` (or ``python scripts/env.py``).

Each key ends up on exactly one line: an existing line is rewritten where it stands (its
comments and every other line are kept), a second line of the same key (left by an older
``>> .env`` recipe) is removed, and a new key is added at the end. A new ``.env`` is created
readable by its owner only. The edit itself is python-dotenv's ``set_key`` (a temporary file
renamed over the old one, which keeps its permissions).

Values:

- ``KEY=generate``: a random secret (64 hex digits, safe in URLs), only when KEY has no value
  yet, so running the same command again keeps the secret (``KEY=regenerate`` replaces it);
- ``KEY={OTHER}`` (also inside a longer value): OTHER's value in this ``.env`` after the earlier
  arguments, e.g. ``DATABASE_URL=postgresql://bot:{POSTGRES_PASSWORD}@postgres:5432/bot``;
- ``KEY`` alone: the value of the environment variable KEY (``make env`` passes its
  command-line variables that way, so no value appears in a process list);
- anything else is written as given.

A value the commands would refuse at start (``LLM_TIMEOUT=abc``) is refused here, by the same
rules, and nothing is written.

Nothing prints a value unless asked: each key is reported as ``set``, ``generated`` or ``kept``;
``--print KEY`` prints one value (for a client that needs the token).

    make env BOT_API_TOKEN=generate
    make env POSTGRES_PASSWORD=generate DATABASE_URL=postgresql://bot:{POSTGRES_PASSWORD}@postgres:5432/bot
    python scripts/env.py --file deploy/.env OPENAI_API_KEY      # the value from the environment
    python scripts/env.py --print BOT_API_TOKEN
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path

from dotenv import dotenv_values, set_key
from dotenv.main import rewrite
from dotenv.parser import parse_stream

KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REFERENCE = re.compile(r"\{([A-Z_][A-Z0-9_]*)\}")
PLAIN = re.compile(r"[A-Za-z0-9_./:@+=%,-]*")
"""Values written without quotes; any other is single-quoted, as Docker Compose reads it too."""


class EnvError(Exception):
    """A refused argument; the text says what to do."""


def _current(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    return {k: v for k, v in dotenv_values(path, interpolate=False).items() if v is not None}


def _value(key: str, given: str | None, values: dict[str, str]) -> tuple[str, str]:
    """The value to write for ``key`` and how to report it (``set``, ``generated``, ``kept``)."""
    if given is None:
        raise EnvError(f"{key}: no value given and no environment variable {key}")
    if given == "generate" and values.get(key):
        return values[key], "kept"
    if given in ("generate", "regenerate"):
        return secrets.token_hex(32), "generated"

    def resolve(found: re.Match[str]) -> str:
        name = found.group(1)
        if not values.get(name):
            raise EnvError(f"{key}: {{{name}}} has no value in the file yet (set it first)")
        return values[name]

    return REFERENCE.sub(resolve, given), "set"


def _one_line_each(path: Path, key: str) -> None:
    """Remove every line of ``key`` after its first one."""
    with rewrite(path, encoding="utf-8") as (source, dest):
        seen = False
        for binding in parse_stream(source):
            if binding.key == key:
                if seen:
                    continue
                seen = True
            dest.write(binding.original.string)


def _check_settings(values: dict[str, str]) -> None:
    """Refuse the file as it would be when a command would refuse it at start: the rules of
    the settings (``LLM_TIMEOUT=abc``, ``TELEGRAM_EDIT_INTERVAL=0``...), nothing written."""
    try:
        from generic_framework.chats.telegram.settings import TelegramSettings
        from generic_framework.config import Settings
        from generic_framework.environment import environment_values
        from generic_framework.errors import ConfigError
    except ImportError:  # run outside the project's environment: the commands check at start
        return
    for model in (Settings, TelegramSettings):
        found = environment_values(model, values)
        try:
            model.defaults(**found)
        except ConfigError as exc:
            raise EnvError(f"{exc}; nothing was written") from None


def set_values(path: Path, assignments: list[str]) -> list[tuple[str, str]]:
    """Apply ``KEY=VALUE`` / ``KEY`` arguments in order; ``(key, what happened)`` for each."""
    parsed = []
    for argument in assignments:
        key, sign, given = argument.partition("=")
        if not KEY.fullmatch(key):
            raise EnvError(f"{argument.partition('=')[0]!r} is not a variable name")
        parsed.append((key, given if sign else os.environ.get(key)))
    # References last, so a value can use one set by the same command (make passes its
    # variables in no particular order).
    parsed.sort(key=lambda item: bool(item[1] and REFERENCE.search(item[1])))
    values = _current(path)
    planned = []  # every argument is checked before the file changes
    for key, given in parsed:
        value, what = _value(key, given, values)
        if "\n" in value or "'" in value or "\\" in value:
            raise EnvError(f"{key}: a value with a newline, ' or \\ is read differently by tools")
        values[key] = value
        planned.append((key, value, what))
    _check_settings(values)
    if not path.exists():
        path.touch(mode=0o600)
    for key, value, _ in planned:
        set_key(path, key, value, quote_mode="never" if PLAIN.fullmatch(value) else "always")
        _one_line_each(path, key)
    return [(key, what) for key, _, what in planned]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=Path(".env"), help="default: ./.env")
    parser.add_argument("--print", metavar="KEY", dest="show", help="print one value")
    parser.add_argument("assignments", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        if args.show:
            value = _current(args.file).get(args.show)
            if value is None:
                raise EnvError(f"{args.show} is not set in {args.file}")
            print(value)
            return 0
        if not args.assignments:
            raise EnvError("nothing to set: give KEY=VALUE arguments (see --help)")
        for key, what in set_values(args.file, args.assignments):
            print(f"{args.file}: {key} {what}")
    except EnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
