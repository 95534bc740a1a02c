"""Small helpers that tests in several folders share: the CLI as a subprocess (run to its end, or
a server started in the background and waited for), the IPv6 loopback probe, polling, a
recording upstream budget."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from generic_framework.wire.slots import SlotLease

ROOT = Path(__file__).resolve().parents[1]


# asyncio's debug mode (``-X dev``, ``PYTHONDEVMODE=1``) reports every step over 0.1 s. On a
# loaded machine an ordinary step (a first import, a worker thread's hand-over) can cross that
# line by chance; a step that blocks the loop for a second is a bug whatever the load.
SLOW_STEP = re.compile(r"^Executing <.*> took (\d+\.\d+) seconds$", re.MULTILINE)
BLOCKING = 1.0
DEV_MODE_NOISE = ("Warning", "Traceback", "Exception ignored", "Executing <", "was never awaited")


def assert_quiet(stderr: str) -> str:
    """Fail on any leak, warning or loop-blocking step in a development-mode process's
    ``stderr``; returns it without the sub-second slow steps."""
    assert all(float(took) < BLOCKING for took in SLOW_STEP.findall(stderr)), stderr
    stderr = re.sub(r"\n{2,}", "\n", SLOW_STEP.sub("", stderr)).lstrip("\n")
    for needle in DEV_MODE_NOISE:
        assert needle not in stderr, stderr
    return stderr


def run_cli(
    args: list[str],
    env: dict[str, str],
    *,
    stdin: str | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``python -m generic_framework ARGS`` as users run it: output as text, exit code kept."""
    return subprocess.run(
        [sys.executable, "-m", "generic_framework", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or ROOT,
        timeout=timeout,
        check=False,
    )


def start_cli(
    args: list[str], env: dict[str, str], *, cwd: Path | None = None, **streams: Any
) -> subprocess.Popen[Any]:
    """``python -m generic_framework ARGS`` started in the background (a server: ``serve``,
    ``mock``); ``streams`` are :class:`subprocess.Popen`'s (``stdout``, ``stderr``, ``text``).
    The caller stops it."""
    return subprocess.Popen(
        [sys.executable, "-m", "generic_framework", *args], env=env, cwd=cwd or ROOT, **streams
    )


async def every_upstream_reachable(host: str, port: int, seconds: float) -> None:
    """A ``connect`` for :class:`~generic_framework.service.readiness.UpstreamProbe` that finds
    every upstream reachable: ``/readyz`` never looks up the real endpoint's name offline."""


def healthy(url: str) -> bool:
    """Whether the server at ``url`` answers ``/healthz`` with 200 now."""
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def wait_healthy(proc: subprocess.Popen[Any], url: str, *, seconds: float = 60.0) -> bool:
    """Wait for the server ``proc`` runs at ``url`` (a port chosen before it started) to answer
    ``/healthz``: False when the process exits first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        if healthy(url):
            return True
        time.sleep(0.05)
    return False


def wait_logged_port(
    proc: subprocess.Popen[Any],
    log: Path,
    *,
    host: str = "127.0.0.1",
    offset: int = 0,
    seconds: float = 60.0,
) -> int | None:
    """The port of a server started on port 0, read from uvicorn's start-up line in ``log``
    (after byte ``offset``: a log shared by restarts) once ``/healthz`` answers there; None when
    the process exits first or ``seconds`` pass. ``host`` as a URL writes it (``[::1]``)."""
    running = re.compile(rb"Uvicorn running on http://" + re.escape(host.encode()) + rb":(\d+)")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = running.search(log.read_bytes()[offset:])
        if found and healthy(f"http://{host}:{found.group(1).decode()}"):
            return int(found.group(1))
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def listening_sockets(count: int) -> Iterator[list[socket.socket]]:
    """``count`` TCP sockets already listening on 127.0.0.1, each on a port of its own, for a
    child process to inherit (HAProxy's ``bind fd@N``, with ``pass_fds``); closed on exit.

    A port picked with :func:`free_port` is free only until the child binds it: on a shared
    machine another process can take it in between, and another HAProxy (SO_REUSEPORT) can even
    share it silently, so that some connections reach a stranger's listener. A socket bound and
    listening before the child starts cannot be taken, and connections made before the child is
    up wait in its backlog.
    """
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
            sock.listen(128)
            sock.set_inheritable(True)
        yield sockets


def has_ipv6_loopback() -> bool:
    """Whether this machine can bind ``::1`` (containers often cannot)."""
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6_loopback = pytest.mark.skipif(
    not has_ipv6_loopback(), reason="no IPv6 loopback on this machine"
)


def until(check: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Poll ``check`` until it holds; fail saying ``what`` was awaited after ``seconds`` (a
    busy machine may take long; a quiet one does not wait)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


class Lines:
    """A process's text pipe read line by line in a thread, so that a test can wait for a line
    (:meth:`wait`) and still read the whole of it after the process ends (:meth:`text`)."""

    def __init__(self, pipe: Any) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe: Any) -> None:
        with pipe:
            for line in pipe:
                self.lines.append(line)

    def wait(self, text: str, seconds: float = 60.0) -> None:
        """Until a line holds ``text`` (fail after ``seconds``, or when the pipe closes first)."""

        def seen() -> bool:
            found = any(text in line for line in self.lines)
            assert found or self._thread.is_alive(), f"the pipe closed without {text!r}"
            return found

        until(seen, f"a line with {text!r}", seconds)

    def text(self, seconds: float = 30.0) -> str:
        """All of it, once the pipe has closed (the process ended)."""
        self._thread.join(seconds)
        return "".join(self.lines)


async def wait_for(check: Callable[[], bool], what: str = "", seconds: float = 30.0) -> None:
    """Poll ``check`` until it holds; fail saying ``what`` was awaited after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what or 'the check'}"
        await asyncio.sleep(0.02)


class RecordingSlots:
    """A budget that records what the client asks of it."""

    limit = 1

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def acquire(self, *, respect_pause: bool = True) -> SlotLease:
        self.calls.append(("acquire", respect_pause))
        calls = self.calls

        class Lease:
            async def release(self) -> None:
                calls.append("release")

        return Lease()

    async def pause(self, seconds: float) -> None:
        self.calls.append(("pause", seconds))

    async def aclose(self) -> None:
        self.calls.append("close")
