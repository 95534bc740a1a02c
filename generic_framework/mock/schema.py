"""The fixture format's JSON Schema, generated from the pydantic models.

``python -m generic_framework.mock.schema > docs/design/fixture.schema.json`` refreshes the
checked-in copy; a test fails when the two differ.
"""

from __future__ import annotations

import json
from typing import Any

from generic_framework.mock.fixture import Fixture

__all__ = ["fixture_schema", "fixture_schema_text"]


def fixture_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a fixture file."""
    schema = Fixture.model_json_schema(mode="validation")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def fixture_schema_text() -> str:
    """The schema as the checked-in file holds it: indented, keys in model order, final newline."""
    return json.dumps(fixture_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(fixture_schema_text(), end="")
