"""Listening sockets: every bind failure is a ConfigError saying what to do, before serving."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from support import needs_ipv6_loopback

from generic_framework.errors import ConfigError
from generic_framework.listening import Server, listen, serve, url_host


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_listen_binds_and_listens() -> None:
    (sock,) = listen("127.0.0.1", 0)
    with sock, socket.create_connection(sock.getsockname()[:2], timeout=2):
        assert sock.getsockname()[1] > 0


def test_a_taken_port_is_a_config_error(taken_port: int) -> None:
    with pytest.raises(ConfigError) as caught:
        listen("127.0.0.1", taken_port)
    assert str(caught.value) == (
        f"cannot listen on 127.0.0.1:{taken_port} (Address already in use): another program is "
        "listening there: choose another port, or stop it"
    )


def test_an_address_of_another_machine_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="that address is not one of this machine's"):
        listen("192.0.2.10", 0)


def test_a_name_that_does_not_resolve_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="the name does not resolve"):
        listen("no-such-host.invalid", 0)


def test_url_host_brackets_ipv6() -> None:
    assert (url_host("::1"), url_host("127.0.0.1")) == ("[::1]", "127.0.0.1")


@needs_ipv6_loopback
def test_serve_announces_the_sockets_it_was_given(caplog: pytest.LogCaptureFixture) -> None:
    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("hi"))])
    sockets = listen("::1", 0)
    port = sockets[0].getsockname()[1]
    # log_config=None: uvicorn's records reach the root logger, where caplog listens.
    config = uvicorn.Config(app, lifespan="off", log_config=None, log_level="info")
    server = Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    with caplog.at_level(logging.INFO, logger="uvicorn.error"):
        thread.start()
        deadline = time.monotonic() + 10
        while f"Uvicorn running on http://[::1]:{port} " not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.01)
        assert httpx.get(f"http://[::1]:{port}/", timeout=30).text == "hi"
    server.should_exit = True
    thread.join(10)
    assert not thread.is_alive()


def test_serve_closes_the_sockets_when_the_server_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    sockets = listen("127.0.0.1", 0)
    serve(uvicorn.Config(Starlette()), sockets)
    assert all(sock.fileno() == -1 for sock in sockets)
