"""The client's address behind a proxy: ``X-Forwarded-For`` believed from
``BOT_TRUSTED_PROXIES`` only, seen in the JSON access log; real sockets and a real HAProxy."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_processes import Process, bot_process, mock_process
from support import listening_sockets, until

from generic_framework.config import Settings
from generic_framework.errors import ConfigError
from generic_framework.limits import trusted_proxies
from generic_framework.service.forwarded import forwarded_client, parse_address

ROOT = Path(__file__).resolve().parents[2]
CLIENT = "127.0.0.2"  # the test's own address: another loopback address than the proxy's
SPOOF = "203.0.113.9"


def _trusted(*networks: str) -> Any:
    parsed = trusted_proxies(",".join(networks))
    return lambda address: any(address in n for n in parsed)


def test_the_right_most_untrusted_address_is_the_client() -> None:
    proxies = _trusted("10.0.0.0/8", "192.0.2.1")
    ip = ipaddress.ip_address
    assert forwarded_client(["198.51.100.7"], proxies) == ip("198.51.100.7")
    # The client claims to be 203.0.113.9; the proxy appended where it really came from.
    assert forwarded_client([SPOOF, " 198.51.100.7", "10.1.2.3"], proxies) == ip("198.51.100.7")
    # Every hop a trusted proxy: the left-most is the client.
    assert forwarded_client(["10.0.0.9", "192.0.2.1"], proxies) == ip("10.0.0.9")
    # Garbage ends the walk: the last address a proxy wrote stands.
    assert forwarded_client([SPOOF, "unknown", "10.0.0.9"], proxies) == ip("10.0.0.9")
    assert forwarded_client(["unknown"], proxies) is None
    assert forwarded_client([], proxies) is None
    assert parse_address("[2001:db8::1]:4711") == ip("2001:db8::1")
    assert parse_address("198.51.100.7:4711") == ip("198.51.100.7")
    assert parse_address("::ffff:10.0.0.1") == ip("10.0.0.1")
    assert parse_address("2001:db8::2") == ip("2001:db8::2")
    assert parse_address("bot.example") is None


def test_the_setting_is_parsed_in_one_place_and_bad_entries_are_refused() -> None:
    settings = Settings.defaults(bot_trusted_proxies=" 172.29.76.10, 10.0.0.0/8,[::1]")
    assert settings.bot_trusted_proxies == "172.29.76.10/32,10.0.0.0/8,::1/128"
    assert settings.trusted_proxies == trusted_proxies("172.29.76.10,10.0.0.0/8,::1")
    assert Settings.defaults().trusted_proxies == ()
    for bad in ("proxy", "10.0.0.5/24", "10.0.0.300"):
        with pytest.raises(ConfigError, match="BOT_TRUSTED_PROXIES must be IP addresses"):
            Settings.defaults(bot_trusted_proxies=bad)


def _get(url: str, tag: str, *, source: str = CLIENT, xff: str | None = None) -> None:
    headers = {"X-Forwarded-For": xff} if xff is not None else {}
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        assert client.get(f"{url}/healthz", params={"tag": tag}, headers=headers).status_code == 200


def _clients(bot: Process, tags: set[str]) -> dict[str, str]:
    """tag -> the client of the JSON access line of ``/healthz?tag=...``, once the log holds a
    line for each of ``tags`` (the access log is written after the answer is sent)."""
    found: dict[str, str] = {}

    def logged() -> bool:
        for line in bot.log.read_text().splitlines():
            if line.startswith("{") and '"uvicorn.access"' in line:
                record = json.loads(line)
                if "tag=" in record["path"]:
                    found[record["path"].partition("tag=")[2]] = record["client"]
        return tags <= found.keys()

    until(logged, f"access lines for {sorted(tags)}")
    return found


@pytest.fixture
def proxy_cfg(tmp_path: Path) -> Iterator[Any]:
    """Runs the shipped HAProxy configuration on loopback in front of one bot."""
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        pytest.fail("haproxy is not installed: .ci/run installs Debian's haproxy package")
    running: list[subprocess.Popen[bytes]] = []
    held = ExitStack()

    def start(bot: Process) -> str:
        (listener,) = held.enter_context(listening_sockets(1))
        port = listener.getsockname()[1]
        cfg = (ROOT / "deploy" / "haproxy.cfg").read_text()
        cfg = cfg.replace("/usr/local/etc/haproxy/errors", str(ROOT / "deploy" / "haproxy-errors"))
        cfg = cfg.replace("bind :8080", f"bind fd@{listener.fileno()}")
        cfg = cfg.replace("nameserver dns 127.0.0.11:53", "nameserver dns 127.0.0.1:9")
        cfg = cfg.replace("    log stdout format raw local0 info\n", "")
        cfg = cfg.replace(" resolvers docker resolve-prefer ipv4 init-addr none", "")
        cfg = cfg.replace("server-template bot 10 bot:8080", f"server bot1 127.0.0.1:{bot.port}")
        assert f"server bot1 127.0.0.1:{bot.port}" in cfg
        (tmp_path / "haproxy.cfg").write_text(cfg)
        proc = subprocess.Popen(
            [haproxy, "-db", "-f", str(tmp_path / "haproxy.cfg")], pass_fds=[listener.fileno()]
        )
        running.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60  # bounds a hang only: a busy machine takes its time
        while time.monotonic() < deadline:  # until the health check brought the bot in
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError("haproxy did not start forwarding")

    with held:
        yield start
        for proc in running:
            proc.terminate()
            proc.wait(10)


@pytest.mark.e2e
def test_through_a_real_haproxy_the_log_shows_the_client_and_spoofs_are_ignored(
    tmp_path: Path, proxy_cfg: Any
) -> None:
    with (
        mock_process(tmp_path) as mock,
        bot_process(tmp_path, mock, LOG_FORMAT="json", BOT_TRUSTED_PROXIES="127.0.0.1") as bot,
    ):
        proxy = proxy_cfg(bot)
        _get(proxy, "proxied")
        _get(proxy, "proxied-spoof", xff=SPOOF)  # the proxy appends 127.0.0.2 after it
        _get(bot.url, "direct-spoof", xff=SPOOF)  # from 127.0.0.2, not a trusted proxy
        _get(bot.url, "trusted-peer", source="127.0.0.1", xff=f"{SPOOF}, 198.51.100.7")
        clients = _clients(bot, {"proxied", "proxied-spoof", "direct-spoof", "trusted-peer"})
    assert clients == {
        "proxied": CLIENT,
        "proxied-spoof": CLIENT,
        "direct-spoof": CLIENT,
        "trusted-peer": "198.51.100.7",
    }


@pytest.mark.e2e
def test_without_the_setting_no_peer_is_believed_not_even_loopback(tmp_path: Path) -> None:
    # uvicorn alone would believe X-Forwarded-For from 127.0.0.1 (its FORWARDED_ALLOW_IPS).
    with mock_process(tmp_path) as mock, bot_process(tmp_path, mock, LOG_FORMAT="json") as bot:
        _get(bot.url, "loopback-spoof", source="127.0.0.1", xff=SPOOF)
        _get(bot.url, "other-spoof", xff=SPOOF)
        clients = _clients(bot, {"loopback-spoof", "other-spoof"})
    assert clients == {"loopback-spoof": "127.0.0.1", "other-spoof": CLIENT}
