"""Replicas replaced one at a time behind the shipped HAProxy configuration, under load, with no
container engine: the drain and the proxy's checks and retries are what a rolling upgrade rests
on (docs/design/0610; the runs on Docker Swarm and compose are in docs/reliability.md, section 10).

Two ``generic-framework serve`` processes on one PostgreSQL and the mock (300 ms per answer),
Debian's HAProxy with ``deploy/haproxy.cfg`` (its checks, timeouts, retries and error pages; the
two replicas as fixed servers instead of Docker's DNS). While ``upgrade_load`` sends turns and
completions through it, each replica in turn gets SIGTERM and is replaced by a new process on
the same port once it has stopped; the next one is stopped only after the proxy has seen the
new one healthy. Every request must succeed and every acknowledged turn be stored.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from scale_load import bot_env
from service_processes import TOKEN, Process, mock_process
from support import free_port, listening_sockets, until
from upgrade_load import UpgradeConfig, render, run_upgrade_load

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def haproxy_config(listener: socket.socket, replicas: list[int], stats: Path) -> str:
    """deploy/haproxy.cfg made local: its listening socket (inherited), its error pages'
    folder, fixed servers, and a stats socket at ``stats`` for the test to ask which
    servers the proxy takes as up."""
    cfg = (DEPLOY / "haproxy.cfg").read_text()
    cfg = cfg.replace("global\n", f"global\n    stats socket {stats}\n", 1)
    cfg = cfg.replace("/usr/local/etc/haproxy/errors", str(DEPLOY / "haproxy-errors"))
    cfg = cfg.replace("bind :8080", f"bind fd@{listener.fileno()}")
    cfg = cfg.replace("nameserver dns 127.0.0.11:53", "nameserver dns 127.0.0.1:9")
    cfg = cfg.replace("    log stdout format raw local0 info\n", "")
    template = re.search(r"\n\s*server-template bot \d+ bot:8080\n", cfg)
    assert template, "deploy/haproxy.cfg finds the replicas with server-template"
    servers = "".join(f"\n    server bot{i} 127.0.0.1:{p}" for i, p in enumerate(replicas))
    cfg = cfg.replace(template.group(0), servers + "\n")
    # The checks as shipped; only the DNS part goes (the servers have fixed addresses).
    return cfg.replace(" resolvers docker resolve-prefer ipv4 init-addr none", "")


def server_states(stats: Path) -> dict[str, str]:
    """Each server of the ``bots`` backend and its state as the proxy sees it (``UP``,
    ``DOWN``, ``UP 1/2`` while going down, ``DOWN 1/2`` while coming back...)."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(stats))
        sock.sendall(b"show stat\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    header, *rows = answer.decode().lstrip("# ").splitlines()
    columns = header.split(",")
    records = [dict(zip(columns, row.split(","), strict=False)) for row in rows if row]
    return {
        r["svname"]: r["status"]
        for r in records
        if r["pxname"] == "bots" and r["svname"] not in ("BACKEND", "FRONTEND")
    }


@pytest.fixture
def haproxy_binary() -> str:
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(found).exists():
        pytest.fail("haproxy is not installed: .ci/run installs Debian's haproxy package")
    return found


class Replica:
    """One replica's port, and the process serving on it now."""

    def __init__(self, tmp: Path, env: dict[str, str], port: int, name: str) -> None:
        self.tmp, self.env, self.port, self.name = tmp, env, port, name
        self.generation = 0
        self.process = self._new()

    def _new(self) -> Process:
        self.generation += 1
        args = ["serve", "--host", "127.0.0.1", "--port", str(self.port)]
        log = self.tmp / f"{self.name}-{self.generation}.log"
        return Process(args, log, self.env, self.tmp)

    def replace(self) -> None:
        """SIGTERM, wait for the old process to end, start a new one on the same port."""
        old = self.process.proc
        assert old is not None
        old.send_signal(signal.SIGTERM)
        old.wait(60)
        self.process = self._new().start(60)


@pytest.fixture
def replicas(tmp_path: Path, postgres_server: Any) -> Iterator[list[Replica]]:
    url = postgres_server.create_database("upgrade")
    with mock_process(tmp_path, latency_ms=300) as mock:
        env = bot_env(tmp_path, mock, url, BOT_DRAIN_DELAY="8", LLM_MAX_RETRIES="0")
        started = [Replica(tmp_path, env, free_port(), f"bot{i}") for i in range(2)]
        try:
            for replica in started:
                replica.process.start(60)
            yield started
        finally:
            for replica in started:
                replica.process.stop()


@pytest.fixture
def proxy_listener() -> Iterator[socket.socket]:
    """The proxy's listening socket, bound before HAProxy starts (it inherits it)."""
    with listening_sockets(1) as (listener,):
        yield listener


def test_replicas_replaced_one_at_a_time_behind_haproxy_fail_no_request(
    tmp_path: Path, replicas: list[Replica], haproxy_binary: str, proxy_listener: socket.socket
) -> None:
    port = proxy_listener.getsockname()[1]
    fds = [proxy_listener.fileno()]
    cfg = tmp_path / "haproxy.cfg"
    # A socket's path has at most 107 bytes: a short folder of its own, not the test's.
    stats = Path(tempfile.mkdtemp(prefix="gf-haproxy-")) / "stats.sock"
    cfg.write_text(haproxy_config(proxy_listener, [r.port for r in replicas], stats))
    checked = subprocess.run([haproxy_binary, "-c", "-f", str(cfg)], capture_output=True,
                             text=True, check=False, pass_fds=fds)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proxy = subprocess.Popen([haproxy_binary, "-db", "-f", str(cfg)], pass_fds=fds,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # bounds a hang only: a busy machine takes its time
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "HAProxy did not come up"
            time.sleep(0.2)

        async def roll() -> int:
            for index, replica in enumerate(replicas):
                await asyncio.to_thread(replica.replace)
                # The proxy brings the new process back after two passed checks (3 s apart):
                # the next replica stops only once the proxy sends to this one again.
                # (asked from a thread: the load shares this event loop).
                up = f"bot{index}"
                await asyncio.to_thread(
                    until, lambda: server_states(stats).get(up) == "UP", f"{up} is up again", 60
                )
            return 0

        config = UpgradeConfig(url=f"http://127.0.0.1:{port}", workers=6, before=3, after=3)
        result, load = asyncio.run(run_upgrade_load(config, TOKEN, roll))
    finally:
        proxy.terminate()
        proxy.wait(10)
        shutil.rmtree(stats.parent, ignore_errors=True)
    print("\n" + render(result))
    assert result.ok, result.problems[:10]
    assert result.failed == 0 and result.upgrade["requests"] > 50
    assert result.acknowledged_turns == result.stored_turns > 0
    # Both replicas were replaced, each after draining.
    for replica in replicas:
        assert replica.generation == 2
        first = (tmp_path / f"{replica.name}-1.log").read_text()
        assert "draining: /readyz answers 503; serving 8 s more" in first
    assert {r.kind for r in load.records} == {
        "turn",
        "turn-stream",
        "completion",
        "completion-stream",
    }
