"""The Python examples of docs/personas.md run unchanged (against the mock, in a fresh
interpreter)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import assert_quiet

from generic_framework.mock import MockServer, bundled_fixtures_dir, load_fixtures

REPO = Path(__file__).resolve().parents[2]
PERSONAS_PAGE = REPO / "docs" / "personas.md"


def _readme_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PERSONAS_PAGE.read_text(), re.S)
    return next(block for block in blocks if "async with Persona(" in block)


def _fixture(source: str, name: str, question: str, answer: str) -> dict[str, Any]:
    data = json.loads((bundled_fixtures_dir() / source).read_text(encoding="utf-8"))
    data.update(name=name, user_input=f"// {question}", expected=None)
    for exchange in data["exchanges"]:
        exchange["request"]["body"]["messages"][-1]["content"] = question
        body = exchange["response"].get("body")
        if body is not None:
            body["choices"][0]["message"]["content"] = answer
    return data


def test_the_readme_python_example_runs_unchanged(tmp_path: Path) -> None:
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    for data in (
        _fixture(
            "web_search_nanaimo.json", "eur_cad", "100 EUR in CAD today?", "About 160 CAD [1]."
        ),
        _fixture("web_search_nanaimo_stream.json", "eur_jpy", "and in JPY?", ""),
    ):
        (fixtures / f"{data['name']}.json").write_text(json.dumps(data), encoding="utf-8")
    script = _readme_example() + "\nimport asyncio\nasyncio.run(main())\n"
    with MockServer(load_fixtures(fixtures)) as server:
        result = subprocess.run(
            [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
            env={
                "PATH": os.environ.get("PATH", ""),
                "PYTHONPATH": str(REPO),
                "OPENAI_API_KEY": "readme-example-key",
                "OPENAI_BASE_URL": server.base_url,
                "DATA_DIR": str(tmp_path / "data"),
            },
        )
        served = server.report()
    assert result.returncode == 0, result.stderr
    assert "About 160 CAD" in result.stdout
    assert "completed" in result.stdout
    assert served["requests"] == 2, served
    assert_quiet(result.stderr)


def test_the_readme_testing_example_runs_unchanged(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PERSONAS_PAGE.read_text(), re.S)
    example = next(block for block in blocks if "FunctionModel(" in block)
    script = example + "\nimport asyncio\nasyncio.run(test_adder())\nprint('passed')\n"
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error::ResourceWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "passed"
    assert assert_quiet(result.stderr) == ""
