"""The proxies the tests start listen on sockets bound before they start (``bind fd@N``).

A port number picked and freed could be taken by another process before HAProxy binds it, and
HAProxy binds with SO_REUSEPORT: a second HAProxy (another test run on the same machine) could
share the port silently, so that a connection reaches a stranger's listener (a TLS handshake
answered by a plain-HTTP frontend, "wrong version number").
"""

from __future__ import annotations

import socket

import pytest
from support import listening_sockets


def _reuseport_listener(port: int) -> socket.socket:
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()
        raise
    return sock


def test_two_reuseport_listeners_share_a_port_silently() -> None:
    # The failure mode: what two HAProxy processes given the same picked port do.
    with _reuseport_listener(0) as first:
        port = first.getsockname()[1]
        with _reuseport_listener(port) as second:
            assert second.getsockname()[1] == port


def test_a_held_listener_cannot_be_shared_or_taken() -> None:
    with listening_sockets(3) as listeners:
        ports = {sock.getsockname()[1] for sock in listeners}
        assert len(ports) == 3
        for sock in listeners:
            assert sock.get_inheritable()
            with pytest.raises(OSError):
                _reuseport_listener(sock.getsockname()[1]).close()
            with socket.create_connection(sock.getsockname()[:2], timeout=5):
                pass  # listening already: a client waits in the backlog, never refused
    assert all(sock.fileno() == -1 for sock in listeners)
