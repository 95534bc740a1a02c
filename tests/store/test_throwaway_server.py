"""The tests' throwaway PostgreSQL server: a cluster left behind by a killed run is stopped and
removed by the next session; one whose run is still going, and a directory that is not marked
as one of ours, are left alone."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from postgres_server import OWNER, PREFIX, PostgresServer, require_server, sweep_abandoned

pytestmark = pytest.mark.slow


@pytest.fixture
def where() -> Iterator[Path]:
    """A directory of its own (short: the server's socket lives in it), that the server's
    user may enter."""
    made = Path(tempfile.mkdtemp(prefix="gf-sweep-"))
    os.chmod(made, 0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _ended_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_cluster_whose_owner_is_gone_is_stopped_and_removed(where: Path) -> None:
    server = PostgresServer(require_server(), where=where).init()
    unmarked = Path(tempfile.mkdtemp(prefix=PREFIX, dir=where))
    try:
        assert _listening(server.port)
        # Its owner (this process) is running: the sweep leaves it alone.
        assert sweep_abandoned(server.bindir, where) == []
        assert server.root.exists() and _listening(server.port)

        # As if the run that made it had been killed before its clean-up.
        (server.root / OWNER).write_text(f"{_ended_pid()} 1", encoding="ascii")
        assert sweep_abandoned(server.bindir, where) == [server.root]
        assert not server.root.exists()
        assert not _listening(server.port)
        assert unmarked.exists()
    finally:
        server.destroy()
