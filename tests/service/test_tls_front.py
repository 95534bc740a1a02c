"""The TLS front of deploy/ (HAProxy: haproxy.cfg plus haproxy-tls.cfg, as the override file
docker-compose.tls.yml runs them), run for real: Debian's haproxy with a throwaway self-signed
certificate in front of a real bot process, answered over HTTPS, redirecting HTTP, with HSTS."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from service_processes import TOKEN, Process, bot_process, mock_process
from support import listening_sockets

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NANAIMO = "// what's the weather in Nanaimo?"

pytestmark = pytest.mark.e2e


def _haproxy() -> str:
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(found).exists():
        pytest.fail("haproxy is not installed: .ci/run installs Debian's haproxy package")
    return found


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost; (the PEM HAProxy loads, the CA to trust)."""
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    certs = directory / "certs"
    certs.mkdir()
    (certs / "site.pem").write_bytes(cert.read_bytes() + key.read_bytes())
    return certs, cert


def local_configs(
    tmp: Path, bot: Process, certs: Path, listeners: list[socket.socket]
) -> tuple[Path, Path, int, int]:
    """The two shipped files with the container's paths and addresses made local: the bot's
    address for Docker's DNS, and for :8080, :8443 and :8081 the three ``listeners`` (loopback
    sockets HAProxy inherits); the HTTPS and HTTP ports."""
    plain, secure, redirect = listeners
    https, http = secure.getsockname()[1], redirect.getsockname()[1]
    base = (DEPLOY / "haproxy.cfg").read_text()
    base = base.replace("/usr/local/etc/haproxy/errors", str(DEPLOY / "haproxy-errors"))
    base = base.replace("bind :8080", f"bind fd@{plain.fileno()}")
    base = base.replace("nameserver dns 127.0.0.11:53", "nameserver dns 127.0.0.1:9")
    base = base.replace("    log stdout format raw local0 info\n", "")
    base = base.replace(" resolvers docker resolve-prefer ipv4 init-addr none", "")
    base = base.replace("server-template bot 10 bot:8080", f"server bot1 127.0.0.1:{bot.port}")
    tls = (DEPLOY / "haproxy-tls.cfg").read_text()
    for shipped, local in (
        ("bind :8443", f"bind fd@{secure.fileno()}"),
        ("bind :8081", f"bind fd@{redirect.fileno()}"),
        ("/usr/local/etc/haproxy/certs/", f"{certs}/"),
    ):
        assert shipped in tls
        tls = tls.replace(shipped, local)
    (tmp / "haproxy.cfg").write_text(base)
    (tmp / "tls.cfg").write_text(tls)
    return tmp / "haproxy.cfg", tmp / "tls.cfg", https, http


@pytest.fixture
def front(tmp_path: Path) -> Iterator[tuple[str, str, ssl.SSLContext]]:
    """(the HTTPS URL, the HTTP URL, a client context trusting the certificate) of HAProxy in
    front of a real bot."""
    haproxy = _haproxy()
    certs, ca = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(ca))
    with (
        mock_process(tmp_path) as mock,
        bot_process(tmp_path, mock) as bot,
        listening_sockets(3) as listeners,
    ):
        fds = [sock.fileno() for sock in listeners]
        base, tls, https, http = local_configs(tmp_path, bot, certs, listeners)
        command = [haproxy, "-f", str(base), "-f", str(tls)]
        checked = subprocess.run(
            [*command, "-c"], capture_output=True, text=True, check=False, pass_fds=fds
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        log = (tmp_path / "haproxy.log").open("wb")
        proxy = subprocess.Popen(
            [*command, "-db"], stdout=log, stderr=subprocess.STDOUT, pass_fds=fds
        )
        url = f"https://127.0.0.1:{https}"
        try:
            deadline = time.monotonic() + 30  # the check brings the replica up (rise 2, 3 s)
            while True:
                try:
                    if httpx.get(f"{url}/readyz", verify=trust, timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, (tmp_path / "haproxy.log").read_text()
                time.sleep(0.2)
            yield url, f"http://127.0.0.1:{http}", trust
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
            log.close()


def test_a_turn_over_https_with_hsts(front: tuple[str, str, ssl.SSLContext]) -> None:
    url, _, trust = front
    with httpx.Client(base_url=url, verify=trust, headers=AUTH, timeout=60) as client:
        models = client.get("/v1/models")
        assert models.status_code == 200
        assert [m["id"] for m in models.json()["data"]] == ["helper", "scout"]
        hsts = models.headers["strict-transport-security"]
        assert int(hsts.removeprefix("max-age=")) >= 365 * 24 * 3600
        ask = {"model": "scout", "messages": [{"role": "user", "content": NANAIMO}]}
        # As the page sends it: its Origin is https://, the bot hears plain HTTP and knows
        # the scheme from X-Forwarded-Proto (else its Origin check refuses with 403).
        answer = client.post("/v1/chat/completions", json=ask, headers={"Origin": url})
        assert answer.status_code == 200, answer.text
        assert "Nanaimo" in answer.json()["choices"][0]["message"]["content"]
        # A stream passes through unbuffered, over TLS.
        with client.stream("POST", "/v1/chat/completions", json={**ask, "stream": True}) as sse:
            assert sse.headers["content-type"].startswith("text/event-stream")
            events = [line for line in sse.iter_lines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]"
        text = "".join(
            (json.loads(e[6:])["choices"] or [{}])[0].get("delta", {}).get("content") or ""
            for e in events[:-1]
        )
        assert "Nanaimo" in text


def test_tls_1_3_and_1_2_with_http2_offered(front: tuple[str, str, ssl.SSLContext]) -> None:
    url, _, trust = front
    port = int(url.rsplit(":", 1)[1])
    trust.set_alpn_protocols(["h2", "http/1.1"])
    for newest, version in (
        (ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
        (ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
    ):
        trust.maximum_version = newest
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with trust.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.version() == version
                assert tls.selected_alpn_protocol() == "h2"
    assert "ssl-min-ver TLSv1.2" in (DEPLOY / "haproxy-tls.cfg").read_text()


def test_http_is_redirected_to_the_same_url_over_https(
    front: tuple[str, str, ssl.SSLContext],
) -> None:
    _, http, _ = front
    moved = httpx.get(f"{http}/v1/models?limit=2", headers={"Host": "chat.example.com"}, timeout=30)
    assert moved.status_code == 301
    assert moved.headers["location"] == "https://chat.example.com/v1/models?limit=2"
    post = httpx.post(
        f"{http}/v1/chat/completions", headers={"Host": "chat.example.com"}, timeout=30
    )
    assert post.status_code == 301  # nothing reaches the bot over plain HTTP


def test_the_override_file_runs_the_same_two_files_in_the_official_image() -> None:
    override = yaml.safe_load((DEPLOY / "docker-compose.tls.yml").read_text())
    tls: dict[str, Any] = override["services"]["tls"]
    assert tls["image"].startswith("haproxy:") and "profiles" not in tls
    mounts = {v.split(":")[1]: v.split(":")[0] for v in tls["volumes"]}
    assert mounts["/usr/local/etc/haproxy/haproxy.cfg"] == "./deploy/haproxy.cfg"
    assert mounts["/usr/local/etc/haproxy/tls.cfg"] == "./deploy/haproxy-tls.cfg"
    assert mounts["/usr/local/etc/haproxy/certs"] == "./deploy/certs"
    assert tls["command"] == ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg",
                              "-f", "/usr/local/etc/haproxy/tls.cfg"]  # fmt: skip
    published = {p.rsplit(":", 1)[1]: p for p in tls["ports"]}
    assert set(published) == {"8443", "8081"}
    assert "${HTTPS_PORT:-443}" in published["8443"] and "${HTTP_PORT:-80}" in published["8081"]
    assert tls["read_only"] is True and tls["cap_drop"] == ["ALL"]
    assert tls["logging"]["driver"] == "json-file" and tls["mem_limit"]
    ignored = (DEPLOY / "certs" / ".gitignore").read_text().split()
    assert "*" in ignored and "!.gitignore" in ignored  # keys are never committed
