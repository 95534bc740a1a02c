"""The Dockerfile, .dockerignore, docker-compose.yml and the proxy's configuration, checked
without a Docker engine (the closing notes of the scale-out work show a real compose run)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import Lines, listening_sockets

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


def test_dockerfile_is_slim_pinned_non_root_and_runtime_only(dockerfile: list[str]) -> None:
    (base,) = _instructions(dockerfile, "ARG")
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", base)
    froms = _instructions(dockerfile, "FROM")
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    users = _instructions(dockerfile, "USER")
    assert users and users[-1] not in ("root", "0")
    runs = _instructions(dockerfile, "RUN")
    assert "[dev]" not in " ".join(runs) and "requirements-dev" not in " ".join(runs)
    # Dependencies from the hashed lock in one layer, the app (no dependencies) in a later one.
    deps = next(i for i, r in enumerate(runs) if "--require-hashes" in r)
    app = next(i for i, r in enumerate(runs) if "pip install --no-deps /wheels/" in r)
    assert deps < app and "requirements.lock" in runs[deps]
    assert "useradd" in " ".join(runs) and "--create-home" in " ".join(runs)
    assert "VOLUME" not in " ".join(dockerfile)  # no anonymous volume for the mock


def _canonical(name: str) -> str:
    """A distribution's name as pip compares them (``discord.py`` is ``discord-py``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_lock_file_pins_every_runtime_dependency_with_hashes() -> None:
    lock = (ROOT / "requirements.lock").read_text()
    pinned = {_canonical(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", lock, re.M)}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["postgres"]]
    names = {_canonical(re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0]) for spec in wanted}
    assert names - pinned == set(), "regenerate requirements.lock (see the Dockerfile)"
    blocks = [b for b in lock.split("\n") if "==" in b and not b.startswith("#")]
    assert all(b.rstrip().endswith("\\") for b in blocks)  # each pin is followed by hashes
    assert "file://" not in lock and "/opt/" not in lock


def test_dockerfile_healthcheck_and_command(dockerfile: list[str]) -> None:
    (health,) = _instructions(dockerfile, "HEALTHCHECK")
    assert "/healthz" in health and "8080" in health and "HEALTHCHECK_URL" in health
    assert "--start-interval" in health
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
    assert set(services) == {
        "bot", "mock-zai", "postgres", "proxy", "scale-check", "telegram", "discord"
    }  # fmt: skip
    assert "profiles" not in services["bot"]
    assert services["mock-zai"]["profiles"] == ["mock"]
    assert services["telegram"]["profiles"] == ["telegram"]
    assert services["discord"]["profiles"] == ["discord"]
    assert services["postgres"]["profiles"] == services["proxy"]["profiles"] == ["scale"]
    assert services["scale-check"]["profiles"] == ["scale"]
    for name, service in services.items():
        assert service["restart"] == ("no" if name == "scale-check" else "unless-stopped")
        assert "no-new-privileges:true" in service["security_opt"]
    # One image, built once: only the bot builds it, the mock and the Telegram bot never pull it.
    for name in ("mock-zai", "telegram", "discord"):
        assert "build" not in services[name] and services[name]["pull_policy"] == "never"
        assert services[name]["image"] == services["bot"]["image"] == "generic-framework:latest"
    assert "build" in services["bot"]
    for name in ("bot", "mock-zai", "proxy", "telegram", "discord"):
        assert services[name]["read_only"] is True and services[name]["cap_drop"] == ["ALL"]


def test_postgres_service_is_official_with_a_named_volume_and_a_health_check(
    compose: dict[str, Any],
) -> None:
    postgres = compose["services"]["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "postgres-data:/var/lib/postgresql/data" in postgres["volumes"]
    assert "postgres-data" in compose["volumes"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    # No ${...:?}: compose reads the whole file, and the default setup needs no password.
    assert postgres["environment"]["POSTGRES_PASSWORD"] == "${POSTGRES_PASSWORD:-}"


def test_proxy_balances_healthy_replicas_without_buffering_and_with_long_timeouts(
    compose: dict[str, Any],
) -> None:
    proxy = compose["services"]["proxy"]
    assert proxy["image"].startswith("haproxy:")
    assert "./deploy/haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in proxy["volumes"]
    cfg = (ROOT / "deploy" / "haproxy.cfg").read_text()
    lines = {" ".join(line.split()) for line in cfg.splitlines()}
    assert "option httpchk GET /readyz" in lines and "balance roundrobin" in lines
    assert "server-template bot 10 bot:8080" in lines
    # A replica compose has just started is in DNS before it listens: a refused connection is
    # retried on another replica at once, not on the same one (docs/reliability.md, section 10).
    assert "option redispatch 1" in lines and "retries 2" in lines
    assert "timeout server 10m" in lines and "timeout client 10m" in lines
    assert "nameserver dns 127.0.0.11:53" in lines
    for buffering in ("http-buffer-request", "compression"):
        assert buffering not in cfg


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
    # The Host check is on in compose: other containers say `bot`, the proxy passes its
    # clients' Host on; loopback names (the published port, the health check) always pass.
    assert env["BOT_ALLOWED_HOSTS"] == "${BOT_ALLOWED_HOSTS:-bot,proxy}"
    assert bot["ports"] == ["${BOT_PUBLISH_ADDRESS:-127.0.0.1}:${BOT_PORT-8080}:8080"]
    assert bot["depends_on"]["mock-zai"] == {"condition": "service_healthy", "required": False}
    assert bot["depends_on"]["postgres"] == {"condition": "service_healthy", "required": False}
    assert {"/tmp", "/home/bot:uid=10001,gid=10001,mode=0700"} <= set(bot["tmpfs"])


def _probe(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    compile(test[3], "healthcheck", "exec")
    return str(test[3])


def test_healthchecks_probe_healthz(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "127.0.0.1:8080/healthz" in _probe(services["bot"])
    assert "127.0.0.1:8090/healthz" in _probe(services["mock-zai"])
    for name in ("bot", "mock-zai"):
        assert services[name]["healthcheck"]["interval"] == "30s"
    for name in ("bot", "mock-zai", "postgres"):
        assert services[name]["healthcheck"]["start_interval"] == "2s"
    assert services["mock-zai"]["environment"]["HEALTHCHECK_URL"].endswith(":8090/healthz")


def test_mock_service_serves_the_bundled_fixtures_where_the_bot_looks(
    compose: dict[str, Any],
) -> None:
    mock = compose["services"]["mock-zai"]
    assert mock["command"] == ["generic-framework", "mock", "--host", "0.0.0.0", "--port", "8090"]
    assert mock["expose"] == ["8090"]
    url = compose["services"]["bot"]["environment"]["MOCK_ZAI_URL"]
    assert url == "http://mock-zai:8090/api/paas/v4"


def _bot_script(compose: dict[str, Any]) -> str:
    """The bot's start-up script, printing what it would run with instead of running it."""
    command = compose["services"]["bot"]["command"]
    assert command[:2] == ["sh", "-c"]
    # Compose turns $$ into $; the last line would exec the server: print the upstream instead.
    script = command[2].replace("$$", "$")
    exec_line = "exec generic-framework serve --host 0.0.0.0 --port 8080 --stay-on-config-error"
    assert exec_line in script
    return script.replace(exec_line, 'echo "$OPENAI_BASE_URL $OPENAI_API_KEY"')


# The host has no `mock-zai`; a local name stands for a running mock in the first case.
RUNNING_MOCK = "http://localhost:8090/api/paas/v4"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"MOCK_ZAI_URL": RUNNING_MOCK}, f"{RUNNING_MOCK} mock-key"),
        ({"OPENAI_API_KEY": "real"}, "https://api.z.ai/api/paas/v4 real"),
        ({"ZAI_API_KEY": "real"}, "https://api.z.ai/api/paas/v4 "),
    ],
)
def test_bot_uses_the_mock_only_without_a_key(
    compose: dict[str, Any], env: dict[str, str], expected: str
) -> None:
    out = _run_script(compose, env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected.strip()


def test_without_a_key_or_a_running_mock_the_bot_says_what_to_do_and_waits_to_be_stopped(
    compose: dict[str, Any],
) -> None:
    # A restart cannot fix it: the script waits (no restart loop), then exits 2 when stopped.
    proc = subprocess.Popen(
        ["sh", "-c", _bot_script(compose)],
        env=_script_env(compose, {}),  # mock-zai: a name nothing answers to here
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    err = Lines(proc.stderr)
    try:
        err.wait("configuration error: not exiting until stopped")
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        with proc.stdout:
            stdout = proc.stdout.read()
        proc.wait(timeout=30)
    stderr = err.text()
    assert proc.returncode == 2 and stdout == ""
    assert "set OPENAI_API_KEY in .env" in stderr
    assert "docker compose --profile mock up" in stderr
    assert "configuration error: not exiting until stopped" in stderr


def test_the_scale_profile_needs_database_url_and_initialises_it(
    compose: dict[str, Any], tmp_path: Path
) -> None:
    services = compose["services"]
    check = services["scale-check"]
    # Whether it is set, from compose's own reading of .env; the URL itself from .env, for
    # `db upgrade` once PostgreSQL is healthy (the replicas never create the schema: 0325).
    assert check["environment"] == {"DATABASE_URL_SET": "${DATABASE_URL:+yes}"}
    assert check["env_file"] == services["bot"]["env_file"]
    assert check["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["proxy"]["depends_on"]["scale-check"] == {
        "condition": "service_completed_successfully"
    }
    assert services["bot"]["depends_on"]["scale-check"]["required"] is False
    # Not ${DATABASE_URL:?}: compose interpolates every service, whatever the profile.
    lines = (ROOT / "docker-compose.yml").read_text().splitlines()
    assert not [line for line in lines if "${DATABASE_URL:?" in line.split("#")[0]]
    script = check["command"][2].replace("$$", "$")
    env = {"PATH": "/usr/bin:/bin"}
    missing = subprocess.run(
        ["sh", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: the scale profile needs DATABASE_URL in .env")
    stand_in = tmp_path / "generic-framework"
    stand_in.write_text('#!/bin/sh\necho "ran: $*"\n')
    stand_in.chmod(0o755)
    present = {"PATH": f"{tmp_path}:/usr/bin:/bin", "DATABASE_URL_SET": "yes"}
    ran = subprocess.run(
        ["sh", "-c", script], env=present, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0 and ran.stdout == "ran: db upgrade\n", ran.stderr


def _script_env(compose: dict[str, Any], env: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "MOCK_ZAI_URL": compose["services"]["bot"]["environment"]["MOCK_ZAI_URL"],
        "OPENAI_BASE_URL": "https://api.z.ai/api/paas/v4",
        **env,
    }


def _run_script(compose: dict[str, Any], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", _bot_script(compose)],
        env=_script_env(compose, env),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


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


def test_env_example_documents_every_setting() -> None:
    from generic_framework.config import Settings

    text = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, re.M))
    aliases = {"api_key": "OPENAI_API_KEY", "base_url": "OPENAI_BASE_URL"}
    wanted = {aliases.get(name, name.upper()) for name in Settings.model_fields}
    assert wanted <= documented, sorted(wanted - documented)
    assert {"DATABASE_URL", "DATABASE_POOL_SIZE", "POSTGRES_PASSWORD"} <= documented


PROXY_ERRORS = ROOT / "deploy" / "haproxy-errors"


@pytest.mark.parametrize("status", [502, 503, 504])
def test_the_proxy_answers_its_own_errors_as_openai_json_with_retry_after(
    compose: dict[str, Any], status: int
) -> None:
    raw = (PROXY_ERRORS / f"{status}.http").read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0].startswith(f"HTTP/1.1 {status} ")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body)
    assert int(headers["Retry-After"]) > 0
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    cfg = {
        " ".join(line.split())
        for line in (ROOT / "deploy" / "haproxy.cfg").read_text().splitlines()
    }
    assert f"errorfile {status} /usr/local/etc/haproxy/errors/{status}.http" in cfg
    volumes = compose["services"]["proxy"]["volumes"]
    assert "./deploy/haproxy-errors:/usr/local/etc/haproxy/errors:ro" in volumes


def test_haproxy_itself_sends_the_json_503_when_no_replica_is_up(tmp_path: Path) -> None:
    # The real proxy (Debian's haproxy; the compose image runs the same configuration): the
    # shipped configuration with its paths and addresses made local, and no replica at all.
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        pytest.fail("haproxy is not installed: .ci/run installs Debian's haproxy package")
    with listening_sockets(1) as (listener,):
        response = _ask_a_proxy_without_replicas(haproxy, tmp_path, listener)
    assert response is not None and response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["error"]["code"] == "no_replica_available"


def _ask_a_proxy_without_replicas(
    haproxy: str, tmp_path: Path, listener: socket.socket
) -> httpx.Response | None:
    """The shipped configuration, local, on ``listener``; its answer to /v1/models (or None)."""
    cfg = (ROOT / "deploy" / "haproxy.cfg").read_text()
    cfg = cfg.replace("/usr/local/etc/haproxy/errors", str(PROXY_ERRORS))
    cfg = cfg.replace("bind :8080", f"bind fd@{listener.fileno()}")
    cfg = cfg.replace("nameserver dns 127.0.0.11:53", "nameserver dns 127.0.0.1:9")
    cfg = cfg.replace("    log stdout format raw local0 info\n", "")
    (tmp_path / "haproxy.cfg").write_text(cfg)
    fds = [listener.fileno()]
    checked = subprocess.run(
        [haproxy, "-c", "-f", str(tmp_path / "haproxy.cfg")],
        check=False,
        capture_output=True,
        text=True,
        pass_fds=fds,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proxy = subprocess.Popen(
        [haproxy, "-db", "-f", str(tmp_path / "haproxy.cfg")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=fds,
    )
    port = listener.getsockname()[1]
    response = None
    try:
        deadline = time.monotonic() + 30  # bounds a hang only: a busy machine takes its time
        while response is None and time.monotonic() < deadline:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
            except httpx.TransportError:
                time.sleep(0.1)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
    return response


def test_every_service_rotates_its_log_and_has_a_memory_ceiling(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        logging = service.get("logging")
        assert logging is not None and logging["driver"] == "json-file", name
        assert {"max-size", "max-file"} <= set(logging["options"]), name
        assert service.get("mem_limit"), name


def _default(value: str) -> str:
    """The innermost default of a compose ``${A:-${B:-default}}`` value."""
    found = re.search(r":-([^${}]+)\}+$", value)
    assert found, value
    return found.group(1)


def test_the_bot_believes_x_forwarded_for_from_the_proxy_address_only(
    compose: dict[str, Any],
) -> None:
    import ipaddress

    services = compose["services"]
    trusted = services["bot"]["environment"]["BOT_TRUSTED_PROXIES"]
    proxy = services["proxy"]["networks"]["default"]["ipv4_address"]
    tls_override = yaml.safe_load((ROOT / "deploy" / "docker-compose.tls.yml").read_text())
    tls = tls_override["services"]["tls"]["networks"]["default"]["ipv4_address"]
    assert trusted == (
        "${BOT_TRUSTED_PROXIES:-${PROXY_ADDRESS:-172.29.76.10},${TLS_PROXY_ADDRESS:-172.29.76.11}}"
    )
    assert proxy == "${PROXY_ADDRESS:-172.29.76.10}"
    assert tls == "${TLS_PROXY_ADDRESS:-172.29.76.11}"
    (pool,) = compose["networks"]["default"]["ipam"]["config"]
    subnet = ipaddress.ip_network(_default(pool["subnet"]))
    dynamic = ipaddress.ip_network(_default(pool["ip_range"]))
    addresses = {ipaddress.ip_address(_default(proxy)), ipaddress.ip_address(_default(tls))}
    assert len(addresses) == 2
    for address in addresses:
        # Each proxy's address is on the network but never handed to another container.
        assert address in subnet and dynamic.subnet_of(subnet) and address not in dynamic  # type: ignore[arg-type]
        assert address != next(subnet.hosts())  # not the gateway (published ports come from it)
    lines = {
        " ".join(line.split())
        for line in (ROOT / "deploy" / "haproxy.cfg").read_text().splitlines()
    }
    assert "option forwardfor" in lines


def test_prometheus_scrapes_every_replica_directly(compose: dict[str, Any]) -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (sd,) = job["dns_sd_configs"]
    # One target per address the service name resolves to: each replica, not the proxy.
    assert sd["names"] == ["bot"] and sd["type"] == "A" and sd["port"] == 8080
    assert "bot" in compose["services"] and "8080" in " ".join(
        compose["services"]["bot"]["command"]
    )
    assert job["authorization"]["credentials_file"] == "/etc/prometheus/bot-token"
    assert "deploy/bot-token" in (ROOT / ".gitignore").read_text().split()
