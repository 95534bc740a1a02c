"""The mock Z.AI server: protocol-faithful replay of recorded fixtures, with fault injection.

- :func:`create_app` builds the ASGI app; :class:`MockServer` runs it in-process on an ephemeral
  port; :func:`serve_forever` serves it in the foreground (``generic-framework mock``).
- :class:`Fixture` and :func:`load_fixtures` define and read the fixture format
  (``docs/design/0401-fixture-format.md``).
- A request without a recorded answer gets HTTP 400 with code :data:`NO_MATCH_CODE`.
"""

from generic_framework.mock.app import MockApp, create_app
from generic_framework.mock.catalog import NO_MATCH_CODE
from generic_framework.mock.fixture import (
    Exchange,
    Expected,
    Fixture,
    FixtureError,
    MatchOptions,
    RecordedRequest,
    RecordedResponse,
    bundled_fixture_paths,
    bundled_fixtures_dir,
    load_fixture,
    load_fixtures,
)
from generic_framework.mock.server import MockServer, bundled_examples, serve_forever

__all__ = [
    "NO_MATCH_CODE",
    "Exchange",
    "Expected",
    "Fixture",
    "FixtureError",
    "MatchOptions",
    "MockApp",
    "MockServer",
    "RecordedRequest",
    "RecordedResponse",
    "bundled_examples",
    "bundled_fixture_paths",
    "bundled_fixtures_dir",
    "create_app",
    "load_fixture",
    "load_fixtures",
    "serve_forever",
]
