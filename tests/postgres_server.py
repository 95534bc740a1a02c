"""A throwaway PostgreSQL server for tests: ``initdb`` in a temp dir, ``pg_ctl`` on a loopback port.

Uses the server binaries of Debian's ``postgresql`` package (``/usr/lib/postgresql/*/bin``) or
whatever ``initdb`` is on PATH. Run as root, the cluster belongs to the unprivileged ``postgres``
user (the server refuses to run as root). Trust authentication on 127.0.0.1 only; ``fsync`` off,
since the tests never crash the machine, only the server or the clients.

Missing binaries skip the tests that need them, unless ``GF_REQUIRE_POSTGRES=1`` (set by
``.ci/run``, which installs them), which fails them instead: CI must not skip silently.

A cluster's directory names the process that made it (``owner``: its pid and start time). A
run killed before its clean-up leaves its cluster behind, still running and holding its files;
:func:`sweep_abandoned` (called when a test session starts, before any test's clock) stops and
removes those whose owner is gone, and leaves alone those of runs still going beside it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import pytest

from benchmarks.postgres import SERVER_USER
from benchmarks.postgres import bindir as server_bindir


def require_server() -> Path:
    """The binaries' directory, or skip (fail under ``GF_REQUIRE_POSTGRES=1``)."""
    bindir = server_bindir()
    reason = "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    if bindir is None:
        if os.environ.get("GF_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason + " (GF_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    return bindir


PREFIX = "gf-pg-"
OWNER = "owner"


def _process_mark(pid: int) -> str | None:
    """``pid`` and its start time (so that a reused pid is not taken for the owner); ``""``
    when no such process runs, None when that cannot be read (not ours to see)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except FileNotFoundError:
        return ""
    except OSError:
        return None
    # The fields after the command's ")" (which may hold spaces): the 20th is the start time.
    return f"{pid} {stat.rsplit(')', 1)[1].split()[19]}"


def sweep_abandoned(bindir: Path, where: Path | None = None) -> list[Path]:
    """Stop and remove the clusters under ``where`` (the temporary directory) whose owner
    process is gone; the removed directories. A directory without an owner's mark (being made
    this instant, or not one of ours) is left alone."""
    removed = []
    for root in sorted(Path(where or tempfile.gettempdir()).glob(PREFIX + "*")):
        try:
            mark = (root / OWNER).read_text(encoding="ascii").strip()
            owner = int(mark.split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if _process_mark(owner) in (mark, None):
            continue  # its run is still going, or cannot be told from a gone one
        if (root / "data" / "postmaster.pid").exists():
            with suppress(subprocess.SubprocessError, OSError):
                PostgresServer(bindir, root).stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One cluster: start, stop (fast or like a crash), restart, and fresh databases."""

    def __init__(self, bindir: Path, root: Path | None = None, where: Path | None = None) -> None:
        """A new cluster's directory under ``where`` (the temporary directory), marked as this
        process's; or the cluster at ``root`` (to stop one left behind)."""
        self.bindir = bindir
        self.root = root or Path(tempfile.mkdtemp(prefix=PREFIX, dir=where))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._as_user = os.geteuid() == 0
        self._databases = 0
        if root is not None:
            return
        (self.root / OWNER).write_text(_process_mark(os.getpid()) or "", encoding="ascii")
        if self._as_user:
            entry = pwd.getpwnam(SERVER_USER)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = {"user": SERVER_USER, "group": SERVER_USER} if self._as_user else {}
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            check=check,
            cwd=self.root,
            timeout=120,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            **user,  # type: ignore[arg-type]
        )

    def init(self) -> PostgresServer:
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync", "--locale=C.UTF-8",
        )  # fmt: skip
        return self.start()

    def start(self) -> PostgresServer:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c full_page_writes=off -c max_connections=300"
        )
        done = self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log),
                         "-w", "-t", "60", "start", check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr}\n{self.log_text()[-3000:]}")
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``immediate`` is like a crash (no checkpoint, clients cut off)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop like a crash, stay down for ``down_seconds``, start again on the same port."""
        self.stop("immediate")
        time.sleep(down_seconds)
        self.start()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(
        self, prefix: str = "t", *, initialised: bool = True, version: int | None = None
    ) -> str:
        """A fresh database, its schema applied as ``generic-framework db upgrade`` does for a
        new deployment (the service's replicas refuse a database never initialised), or
        empty with ``initialised=False``, or left at schema ``version`` as an older release
        left it (the migration tests); its URL."""
        import psycopg

        from generic_framework.store.postgres_schema import MIGRATIONS

        self._databases += 1
        name = f"{prefix}_{os.getpid()}_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        if initialised:
            with psycopg.connect(self.url(name)) as conn:
                conn.execute(
                    "CREATE TABLE schema_migrations (version integer PRIMARY KEY,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
                applied = MIGRATIONS if version is None else MIGRATIONS[:version]
                for number, statements in enumerate(applied, start=1):
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
        return self.url(name)

    def query(self, url: str, sql: str, *params: object) -> list[tuple[object, ...]]:
        """Run one statement on ``url`` and return its rows (for checks)."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(sql, params or None)
            return cursor.fetchall() if cursor.description else []

    def destroy(self) -> None:
        if self.data.exists():
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
