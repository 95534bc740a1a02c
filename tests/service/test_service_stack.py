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
    assert all("${PROXY_CONFIG_VERSION" in c["name"] for c in configs.values())
    assert proxy["deploy"]["endpoint_mode"] == "dnsrr"


def test_replicas_need_database_url(stack: dict[str, Any]) -> None:
    script = stack["services"]["bot"]["command"][2]
    shell = ["sh", "-c", script.replace("$$", "$"), "sh"]
    env = {"PATH": "/usr/bin:/bin"}  # no DATABASE_URL
    run = subprocess.run(shell, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    assert "set DATABASE_URL in .env" in run.stderr
    assert script.rstrip().endswith("exec generic-framework serve --host 0.0.0.0 --port 8080")


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
        "POSTGRES_PASSWORD": "pw",
    }
    command = [docker, "stack", "config", "-c", str(DEPLOY / "stack.yml"), "-c",
               str(DEPLOY / "stack.mock.yml")]  # fmt: skip
    # env_file ../.env must exist: a copy of the worktree's deploy folder with an empty one.
    (tmp_path / "deploy").mkdir()
    for name in ("stack.yml", "stack.mock.yml", "haproxy.cfg"):
        (tmp_path / "deploy" / name).write_text((DEPLOY / name).read_text())
    shutil.copytree(DEPLOY / "haproxy-errors", tmp_path / "deploy" / "haproxy-errors")
    (tmp_path / ".env").write_text("BOT_API_TOKEN=t\n")
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
    assert config["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == "pw"
    assert set(config["services"]) == {"bot", "mock-zai", "postgres", "proxy"}


def test_the_bot_believes_x_forwarded_for_from_the_stack_network_only(
    stack: dict[str, Any],
) -> None:
    trusted = stack["services"]["bot"]["environment"]["BOT_TRUSTED_PROXIES"]
    (pool,) = stack["networks"]["default"]["ipam"]["config"]
    default_trusted = re.fullmatch(r"\$\{BOT_TRUSTED_PROXIES:-([^${}]+)\}", trusted)
    default_subnet = re.fullmatch(r"\$\{STACK_SUBNET:-([^${}]+)\}", pool["subnet"])
    # One plain default each (the stack file reads no nested ones), and the same network.
    assert default_trusted and default_subnet
    assert default_trusted.group(1) == default_subnet.group(1)
