"""The Dockerfile, .dockerignore and docker-compose.yml, checked without a Docker engine."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (a dev dependency) reads docker-compose.yml")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def _instructions(lines: list[str], name: str) -> list[str]:
    return [line[len(name) :].strip() for line in lines if line.startswith(name + " ")]


def test_dockerfile_is_slim_non_root_and_runtime_only(dockerfile: list[str]) -> None:
    froms = _instructions(dockerfile, "FROM")
    assert froms and all(f.startswith("python:3.11-slim") for f in froms)
    users = _instructions(dockerfile, "USER")
    assert users and users[-1] not in ("root", "0")
    runs = " ".join(_instructions(dockerfile, "RUN"))
    assert "pip install /wheels/" in runs
    assert "[dev]" not in runs and "requirements-dev" not in runs
    assert "useradd" in runs


def test_dockerfile_healthcheck_and_command(dockerfile: list[str]) -> None:
    (health,) = _instructions(dockerfile, "HEALTHCHECK")
    assert "/healthz" in health and "8080" in health
    cmd = _instructions(dockerfile, "CMD")[-1]
    assert cmd == '["generic-framework", "serve", "--host", "0.0.0.0", "--port", "8080"]'
    assert "8080" in _instructions(dockerfile, "EXPOSE")
    probe = re.search(r'"-c", "(.*)"\]', health)
    assert probe is not None
    compile(probe.group(1), "healthcheck", "exec")


def test_dockerignore_keeps_secrets_and_bulk_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".env", ".git", ".venv*", "tests/", "data/"):
        assert entry in ignored


def test_compose_services_and_profiles(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"bot", "mock-zai"}
    assert "profiles" not in services["bot"]
    assert services["mock-zai"]["profiles"] == ["mock"]
    for service in services.values():
        assert service["restart"] == "unless-stopped"
        assert service["image"] == "generic-framework:latest"


def test_bot_service_volumes_env_and_ports(compose: dict[str, Any]) -> None:
    bot = compose["services"]["bot"]
    assert {"path": ".env", "required": False} in bot["env_file"]
    volumes = bot["volumes"]
    assert "bot-data:/data" in volumes
    assert "bot-data" in compose["volumes"]
    assert "./personas:/app/personas:ro" in volumes
    env = bot["environment"]
    assert env["DATA_DIR"] == "/data"
    assert env["PERSONAS_DIR"] == "/app/personas"
    # Compose refuses to start without a token (the service would refuse to bind 0.0.0.0).
    assert env["BOT_API_TOKEN"].startswith("${BOT_API_TOKEN:?")
    assert bot["ports"] == ["${BOT_PUBLISH_ADDRESS:-127.0.0.1}:${BOT_PORT:-8080}:8080"]
    assert bot["depends_on"]["mock-zai"] == {"condition": "service_healthy", "required": False}


def _probe(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    compile(test[3], "healthcheck", "exec")
    return str(test[3])


def test_healthchecks_probe_healthz(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "127.0.0.1:8080/healthz" in _probe(services["bot"])
    assert "127.0.0.1:8090/healthz" in _probe(services["mock-zai"])
    for service in services.values():
        assert service["healthcheck"]["interval"] == "30s"


def test_mock_service_serves_the_bundled_fixtures_where_the_bot_looks(
    compose: dict[str, Any],
) -> None:
    mock = compose["services"]["mock-zai"]
    assert mock["command"] == ["generic-framework", "mock", "--host", "0.0.0.0", "--port", "8090"]
    assert mock["expose"] == ["8090"]
    url = compose["services"]["bot"]["environment"]["MOCK_ZAI_URL"]
    assert url == "http://mock-zai:8090/api/paas/v4"


def _bot_script(compose: dict[str, Any]) -> str:
    command = compose["services"]["bot"]["command"]
    assert command[:2] == ["sh", "-c"]
    # Compose turns $$ into $; the last line would exec the server: print the upstream instead.
    script = command[2].replace("$$", "$")
    exec_line = "exec generic-framework serve --host 0.0.0.0 --port 8080"
    assert exec_line in script
    return script.replace(exec_line, 'echo "$OPENAI_BASE_URL $OPENAI_API_KEY"')


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "http://mock-zai:8090/api/paas/v4 mock-key"),
        ({"OPENAI_API_KEY": "real"}, "https://api.z.ai/api/paas/v4 real"),
        ({"ZAI_API_KEY": "real"}, "https://api.z.ai/api/paas/v4 "),
    ],
)
def test_bot_uses_the_mock_only_without_a_key(
    compose: dict[str, Any], env: dict[str, str], expected: str
) -> None:
    script = _bot_script(compose)
    environment = {
        "PATH": "/usr/bin:/bin",
        "MOCK_ZAI_URL": compose["services"]["bot"]["environment"]["MOCK_ZAI_URL"],
        "OPENAI_BASE_URL": "https://api.z.ai/api/paas/v4",
        **env,
    }
    out = subprocess.run(
        ["sh", "-c", script], env=environment, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected.strip()


@pytest.mark.parametrize(
    ("command", "options"),
    [("serve", ("--host", "--port")), ("mock", ("--host", "--port", "--fixtures"))],
)
def test_the_cli_has_the_options_compose_uses(command: str, options: tuple[str, ...]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "generic_framework", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
    )
    for option in options:
        assert option in out.stdout, shlex.join([command, option])
