"""deploy/stack.yml (the Swarm stack and its rolling upgrade) checked without a Swarm: what the
upgrade relies on, and what `docker stack deploy` would refuse or misread. The runs on a real
engine are in docs/reliability.md, section 10."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (a dev dependency) reads the stack files")

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def _load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def stack() -> dict[str, Any]:
    return _load("stack.yml")


@pytest.fixture(scope="module")
def mock_stack() -> dict[str, Any]:
    return _load("stack.mock.yml")


def _seconds(value: str) -> float:
    """A Go duration as Swarm reads it (135s, 2m15s, 500ms)."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", value)
    assert parts and "".join(n + u for n, u in parts) == value, value
    return sum(float(n) * units[u] for n, u in parts)


def _default(value: str) -> float:
    """The default of a ``${VAR:-default}`` setting."""
    found = re.fullmatch(r"\$\{[A-Z_]+:-([0-9.]+)\}", value)
    assert found, value
    return float(found.group(1))


def _haproxy_check() -> tuple[float, int]:
    """The proxy's check interval (seconds) and failures before a replica is taken out."""
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    line = next(line for line in cfg.splitlines() if line.strip().startswith("default-server"))
    inter = re.search(r"\binter (\d+)(ms|s)\b", line)
    fall = re.search(r"\bfall (\d+)\b", line)
    assert inter and fall, line
    return _seconds(inter.group(1) + inter.group(2)), int(fall.group(1))


def test_bot_replicas_are_replaced_one_at_a_time_new_first_and_rolled_back_on_failure(
    stack: dict[str, Any],
) -> None:
    deploy = stack["services"]["bot"]["deploy"]
    update, rollback = deploy["update_config"], deploy["rollback_config"]
    assert update["parallelism"] == 1 and update["order"] == "start-first"
    assert update["failure_action"] == "rollback"
    assert rollback["parallelism"] == 1 and rollback["order"] == "start-first"
    # Every replica by its own address, so deploy/haproxy.cfg's `server-template ... bot:8080`
    # sees each one (the default, a virtual IP, would be one server balanced by IPVS).
    assert deploy["endpoint_mode"] == "dnsrr"
    assert stack["services"]["bot"]["image"].startswith("${BOT_IMAGE:?")


def test_the_drain_outlasts_the_proxys_check_and_the_grace_period_covers_drain_and_turns(
    stack: dict[str, Any],
) -> None:
    bot = stack["services"]["bot"]
    drain = _default(bot["environment"]["BOT_DRAIN_DELAY"])
    finish = _default(bot["environment"]["BOT_SHUTDOWN_TIMEOUT"])
    inter, fall = _haproxy_check()
    # A draining replica answers 503 from the signal on; the proxy needs `fall` failed checks,
    # `inter` apart, the first within `inter`: all of them before the replica stops accepting.
    assert drain > inter * fall, (drain, inter, fall)
    # Swarm sends SIGKILL after stop_grace_period: the drain and the running turns fit in it.
    assert _seconds(bot["stop_grace_period"]) >= drain + finish + 5
    # Turns of a minute or more (a web search) finish; the fixed 8 s of before cut them.
    assert finish >= 60


def test_the_proxy_uses_the_compose_files_as_swarm_configs(stack: dict[str, Any]) -> None:
    proxy = stack["services"]["proxy"]
    targets = {c["source"]: c["target"] for c in proxy["configs"]}
    assert targets["haproxy_cfg"] == "/usr/local/etc/haproxy/haproxy.cfg"
    configs = stack["configs"]
    assert configs["haproxy_cfg"]["file"] == "./haproxy.cfg"
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    for status in (502, 503, 504):
        name = f"error_{status}"
        assert targets[name] == f"/usr/local/etc/haproxy/errors/{status}.http"
        assert (DEPLOY / configs[name]["file"]).resolve() == DEPLOY / "haproxy-errors" / (
            f"{status}.http"
        )
        assert f"/usr/local/etc/haproxy/errors/{status}.http" in cfg
    # A Swarm config cannot change: its name carries a version to bump with the files.
    assert all(
        "${PROXY_CONFIG_VERSION" in c["name"] or "${PERSONAS_VERSION" in c["name"]
        for c in configs.values()
    )
    assert proxy["deploy"]["endpoint_mode"] == "dnsrr"


def test_replicas_need_database_url(stack: dict[str, Any], tmp_path: Path) -> None:
    script = stack["services"]["bot"]["command"][2]
    shell = ["sh", "-c", script.replace("$$", "$"), "sh"]
    absent = str(tmp_path / "database_url")  # the secret's file, not there
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL_FILE": absent}
    run = subprocess.run(shell, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    assert "put DATABASE_URL in the secret file database_url" in run.stderr
    assert script.rstrip().endswith("exec generic-framework serve --host 0.0.0.0 --port 8080")
    assert stack["services"]["bot"]["environment"]["DATABASE_URL_FILE"] == (
        "/run/secrets/database_url"
    )


def test_the_mock_overlay_points_the_bot_at_the_mock(
    stack: dict[str, Any], mock_stack: dict[str, Any]
) -> None:
    mock = mock_stack["services"]["mock-zai"]
    port = mock["command"][mock["command"].index("--port") + 1]
    env = mock_stack["services"]["bot"]["environment"]
    assert env["OPENAI_BASE_URL"] == f"http://mock-zai:{port}/api/paas/v4"
    assert env["OPENAI_API_KEY"]
    # The upgrade changes BOT_IMAGE; the mock runs its own image and is left alone.
    assert "BOT_IMAGE" not in mock["image"]


@pytest.mark.parametrize("name", ["stack.yml", "stack.mock.yml"])
def test_nothing_docker_stack_deploy_refuses_or_misreads(name: str) -> None:
    text = (DEPLOY / name).read_text()
    data = yaml.safe_load(text)
    for service in data["services"].values():
        # Forbidden by `docker stack deploy` ("Configuration contains forbidden properties"),
        # or silently ignored by it.
        for key in ("mem_limit", "build", "profiles", "depends_on", "restart", "security_opt"):
            assert key not in service, key
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    # The docker client's interpolation knows ${VAR}, ${VAR:-x}, ${VAR-x}, ${VAR:?x}, ${VAR?x}
    # only (not ${VAR:+x}), and misreads a '-' in a :? message as a default: with
    # ${BOT_IMAGE:?... e.g. generic-framework:1} set to generic-framework:1, the image became
    # "framework:1".
    for expression in re.findall(r"(?<!\$)\$\{([^}]*)\}", code):
        found = re.fullmatch(r"[A-Z_][A-Z0-9_]*(?:(:?-)[^}]*|(:?\?)([^}]*))?", expression)
        assert found, expression
        assert "-" not in (found.group(3) or ""), expression


def test_docker_reads_the_stack_files(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client: the file checks above still ran")
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(tmp_path),
        "BOT_IMAGE": "generic-framework:9",
        "SECRETS_DIR": str(tmp_path / "secrets"),
    }
    command = [docker, "stack", "config", "-c", str(DEPLOY / "stack.yml"), "-c",
               str(DEPLOY / "stack.mock.yml")]  # fmt: skip
    # A copy of the worktree's deploy folder and personas, with made-up secret files.
    (tmp_path / "deploy").mkdir()
    for name in ("stack.yml", "stack.mock.yml", "haproxy.cfg", "stack.env"):
        (tmp_path / "deploy" / name).write_text((DEPLOY / name).read_text())
    shutil.copytree(DEPLOY / "haproxy-errors", tmp_path / "deploy" / "haproxy-errors")
    shutil.copytree(ROOT / "personas", tmp_path / "personas")
    (tmp_path / "secrets").mkdir()
    for name in ("zai_api_key", "bot_api_token", "database_url", "postgres_password"):
        (tmp_path / "secrets" / name).write_text("made-up\n")
    command = [c.replace(str(DEPLOY), str(tmp_path / "deploy")) for c in command]
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if "Cannot connect to the Docker daemon" in run.stderr:
        pytest.skip("the docker client needs a running engine here")
    assert run.returncode == 0, run.stderr
    config = yaml.safe_load(run.stdout)
    bot = config["services"]["bot"]
    assert bot["image"] == "generic-framework:9"
    assert bot["environment"]["BOT_DRAIN_DELAY"] == "8"
    assert bot["environment"]["OPENAI_BASE_URL"] == "http://mock-zai:8090/api/paas/v4"
    postgres = config["services"]["postgres"]
    assert postgres["environment"] == {
        "POSTGRES_USER": "bot",
        "POSTGRES_DB": "bot",
        "POSTGRES_PASSWORD_FILE": "/run/secrets/postgres_password",
    }
    assert set(config["services"]) == {"bot", "mock-zai", "postgres", "proxy"}
    assert {s["file"] for s in config["secrets"].values()} == {
        str(tmp_path / "secrets" / name)
        for name in ("zai_api_key", "bot_api_token", "database_url", "postgres_password")
    }


def test_the_bot_believes_x_forwarded_for_from_the_edge_network_only(
    stack: dict[str, Any],
) -> None:
    services = stack["services"]
    trusted = services["bot"]["environment"]["BOT_TRUSTED_PROXIES"]
    (pool,) = stack["networks"]["edge"]["ipam"]["config"]
    default_trusted = re.fullmatch(r"\$\{BOT_TRUSTED_PROXIES:-([^${}]+)\}", trusted)
    default_subnet = re.fullmatch(r"\$\{EDGE_SUBNET:-([^${}]+)\}", pool["subnet"])
    # One plain default each (the stack file reads no nested ones), and the same network.
    assert default_trusted and default_subnet
    assert default_trusted.group(1) == default_subnet.group(1)
    # Only the proxy and the bots are on it: not PostgreSQL, not the mock.
    on_edge = {name for name, svc in services.items() if "edge" in svc.get("networks", [])}
    assert on_edge == {"bot", "proxy"}
    assert services["proxy"]["networks"] == ["edge"]


def test_the_overlays_are_encrypted_with_known_subnets(stack: dict[str, Any]) -> None:
    for name in ("default", "edge"):
        network = stack["networks"][name]
        assert network["driver"] == "overlay"
        assert network["driver_opts"] == {"encrypted": "true"}
        assert network["ipam"]["config"][0]["subnet"]
    assert stack["networks"]["default"]["attachable"] is True  # the one-off `db upgrade`


def test_postgresql_runs_only_on_its_labelled_node_with_its_volume(stack: dict[str, Any]) -> None:
    postgres = stack["services"]["postgres"]
    constraints = postgres["deploy"]["placement"]["constraints"]
    assert constraints == ["node.labels.generic-framework.database == true"]
    assert postgres["volumes"] == ["postgres-data:/var/lib/postgresql/data"]


def test_the_proxy_runs_on_every_node_on_that_node_s_port(stack: dict[str, Any]) -> None:
    proxy = stack["services"]["proxy"]
    assert proxy["deploy"]["mode"] == "global" and "replicas" not in proxy["deploy"]
    (port,) = proxy["ports"]
    assert port["mode"] == "host"


def test_no_secret_is_in_an_environment(stack: dict[str, Any]) -> None:
    secret_names = {"OPENAI_API_KEY", "ZAI_API_KEY", "BOT_API_TOKEN", "DATABASE_URL"}
    secret_names |= {"POSTGRES_PASSWORD", "TELEGRAM_BOT_TOKEN"}
    for name, service in stack["services"].items():
        environment = service.get("environment", {})
        assert not secret_names & set(environment), name
        for variable, value in environment.items():
            if variable.endswith("_FILE"):
                source = value.removeprefix("/run/secrets/")
                assert source in service["secrets"] and source in stack["secrets"], variable
    env_file = (DEPLOY / "stack.env").read_text()
    assert not [line for line in env_file.splitlines() if line.split("=")[0] in secret_names]
    assert stack["services"]["bot"]["env_file"] == ["./stack.env"]


def test_personas_are_configs_not_the_image_s(stack: dict[str, Any]) -> None:
    bot = stack["services"]["bot"]
    folder = bot["environment"]["PERSONAS_DIR"]
    assert not folder.startswith("/app/")
    mounted = {c["target"]: stack["configs"][c["source"]]["file"] for c in bot["configs"]}
    shipped = sorted(p.name for p in (ROOT / "personas").glob("*.toml"))
    assert sorted(Path(target).name for target in mounted) == shipped
    for target, file in mounted.items():
        assert Path(target).parent == Path(folder)
        assert (DEPLOY / file).resolve() == ROOT / "personas" / Path(target).name


def test_the_secret_files_are_made_once_private_and_consistent(tmp_path: Path) -> None:
    script = ROOT / "scripts" / "stack-secrets.sh"
    folder = tmp_path / "secrets"
    env = {"PATH": "/usr/bin:/bin", "ZAI_API_KEY": "zai-key-1"}
    first = subprocess.run(["bash", str(script), str(folder)], env=env, check=True,
                           capture_output=True, text=True)  # fmt: skip
    names = {"zai_api_key", "bot_api_token", "database_url", "postgres_password"}
    assert {p.name for p in folder.iterdir()} == names
    assert all((folder / name).stat().st_mode & 0o077 == 0 for name in names)
    password = (folder / "postgres_password").read_text().strip()
    assert len(password) >= 32
    url = (folder / "database_url").read_text().strip()
    assert url == f"postgresql://bot:{password}@postgres:5432/bot"
    assert (folder / "zai_api_key").read_text() == "zai-key-1\n"
    assert password not in first.stdout + first.stderr
    before = {name: (folder / name).read_text() for name in names}
    subprocess.run(["bash", str(script), str(folder)], env=env, check=True, capture_output=True)
    assert {name: (folder / name).read_text() for name in names} == before  # kept, not remade
    # Every file the stack names as a secret is one the script makes.
    stack = _load("stack.yml")
    assert {Path(s["file"]).name for s in stack["secrets"].values()} == names
