"""A throwaway PostgreSQL server for the harness: ``initdb`` in a temporary directory, ``pg_ctl``
on a loopback port, removed afterwards.

It uses the server binaries of Debian's ``postgresql`` package (``/usr/lib/postgresql/*/bin``)
or whatever ``initdb`` is on ``PATH``; without them :func:`throwaway` yields None and the rows
that need it say "not measured". Run as root, the cluster belongs to the unprivileged
``postgres`` user (the server refuses to run as root). Trust authentication on 127.0.0.1 only,
``fsync`` off (as in the test suite's server): the row measures the client's CPU, not the disk.
The server is pinned to the server CPU, beside the scripted server.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.runner import PINNING, SERVER_CPU

SERVER_USER = "postgres"


def bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, newest version first; None when absent."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
        reverse=True,
    )
    if found:
        return found[0].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def unavailable() -> str | None:
    """Why no server can be started here, or None when one can."""
    if bindir() is None:
        return "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (the project's postgres extra)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no {SERVER_USER!r} user to run the server"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    found = bindir()
    assert found is not None
    cmd = [str(found / args[0]), *args[1:]]
    if PINNING and SERVER_CPU is not None:
        cmd = ["taskset", "-c", str(SERVER_CPU), *cmd]
    user = SERVER_USER if os.geteuid() == 0 else None
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        user=user,
        group=user,
    )


def _initialise(url: str, cwd: Path) -> None:
    """Give the new cluster the project's schema with ``generic-framework db upgrade``, as an
    operator does for a new deployment: the measured processes open it as replicas do, which
    never create it (docs/design/0325). A process of its own, so that a caller already in an
    event loop can use the server too."""
    env = {**os.environ, "DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "generic_framework", "db", "upgrade"],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"db upgrade failed: {done.stderr.strip()[-500:]}")


@contextlib.contextmanager
def throwaway() -> Iterator[str]:
    """Start a fresh cluster and yield its URL; stop and delete it afterwards.

    Raises:
        RuntimeError: ``initdb`` or ``pg_ctl start`` failed (with the server's own words).
    """
    root = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    data, port = root / "data", _free_port()
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVER_USER)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    try:
        done = _run(root, "initdb", "-D", str(data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8", "--no-sync", "--locale=C.UTF-8")  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")
        options = (
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c full_page_writes=off -c max_connections=100"
        )
        done = _run(root, "pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "log"),
                    "-w", "-t", "60", "start")  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()[-500:]}")
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        _initialise(url, root)
        yield url
    finally:
        _run(root, "pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
