"""Stopping `serve` without losing a request: the drain on SIGTERM and the shutdown timeout.

Real processes (the mock with a latency, the bot through the CLI). A proxy checking ``/readyz``
must see the replica not ready before the replica stops accepting connections, and a turn
running when the signal came must finish and be stored (docs/design/0610).
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from service_processes import TOKEN, Process, bot_process, mock_process, mock_requests
from support import until

AUTH = {"Authorization": f"Bearer {TOKEN}"}
DRAIN = 6
"""Seconds of drain: time enough, on a busy machine, for a request sent after the signal to be
accepted and reach the mock before the listening socket closes (checked, not assumed)."""
PAST_DRAIN = 6
"""Seconds each turn of the drain test still waits for its answer after the drain's end: the
turns must be seen running past it, however late a busy machine notices the end."""
CAPITAL = "What is the capital of Canada?"


def _post_turn(bot: Process, conversation: str, timeout: float = 30) -> httpx.Response:
    return httpx.post(
        f"{bot.url}/v1/conversations/{conversation}/messages",
        json={"persona": "scout", "content": CAPITAL},
        headers=AUTH,
        timeout=timeout,
    )


def _in_thread(results: dict[str, object], name: str, bot: Process) -> threading.Thread:
    """The turn ``name`` posted in a thread: its answer (or error) in ``results[name]``, and
    the moment it came in ``results[name + ' at']``."""

    def run() -> None:
        try:
            results[name] = _post_turn(bot, name)
        except httpx.TransportError as exc:
            results[name] = exc
        results[f"{name} at"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _refused(bot: Process) -> bool:
    try:
        httpx.get(f"{bot.url}/healthz", timeout=10)
    except httpx.ConnectError:
        return True
    return False


def _signal(bot: Process, sig: int = signal.SIGTERM) -> None:
    assert bot.proc is not None
    bot.proc.send_signal(sig)


def _wait_refused(bot: Process, seconds: float) -> float:
    """Seconds until a new connection is refused (fails after ``seconds``)."""
    start = time.monotonic()
    while not _refused(bot):
        assert time.monotonic() - start < seconds, "the service still accepts connections"
        time.sleep(0.05)
    return time.monotonic() - start


def _draining(bot: Process) -> bool:
    return httpx.get(f"{bot.url}/readyz", timeout=5).json()["status"] == "draining"


def _exit_code(bot: Process, seconds: float) -> int | None:
    assert bot.proc is not None
    return bot.proc.wait(seconds)


@pytest.mark.slow
def test_sigterm_drains_first_then_finishes_the_running_turns(tmp_path: Path) -> None:
    # Each turn waits for its answer longer than the drain: both run past the drain's end.
    with mock_process(tmp_path, latency_ms=(DRAIN + PAST_DRAIN) * 1000) as mock:
        bot = bot_process(
            tmp_path, mock, BOT_DRAIN_DELAY=str(DRAIN), BOT_SHUTDOWN_TIMEOUT="30"
        ).start()
        try:
            results: dict[str, object] = {}
            before = _in_thread(results, "before", bot)  # running when the signal comes
            until(lambda: mock_requests(mock) == 1, "the first turn waits for its answer")
            signalled = time.monotonic()
            _signal(bot)
            until(lambda: _draining(bot), "the service handled the signal")
            # Draining: not ready (a proxy takes the replica out), alive, still serving.
            ready = httpx.get(f"{bot.url}/readyz", timeout=5)
            assert ready.status_code == 503 and ready.json()["status"] == "draining"
            assert ready.json()["checks"]["store"] == "ok"
            assert httpx.get(f"{bot.url}/healthz", timeout=5).status_code == 200
            # A request that still arrives (the proxy has not noticed yet) is served: it is
            # accepted during the drain and runs past its end.
            during = _in_thread(results, "during", bot)
            # Accepted, and its turn running, before the drain ends (the listening socket's
            # backlog is not a promise: what is not accepted when it closes is reset).
            until(lambda: mock_requests(mock) == 2, "the second turn waits for its answer")
            assert time.monotonic() - signalled < DRAIN, "the machine was too slow to test this"
            _wait_refused(bot, DRAIN + 10)
            refused_after = time.monotonic() - signalled
            assert refused_after >= DRAIN - 0.1, refused_after  # not before the drain's end
            before.join(60)
            during.join(60)
            assert _exit_code(bot, 30) is not None
        finally:
            bot.stop()
        for name in ("before", "during"):
            response = results[name]
            assert isinstance(response, httpx.Response), (name, response)
            assert response.status_code == 200 and "Ottawa" in response.json()["content"]
            # Answered after new connections were refused: the turn ran past the drain's end
            # (PAST_DRAIN seconds of margin for a busy machine to close the socket late).
            answered_after = results[f"{name} at"] - signalled  # type: ignore[operator]
            assert answered_after > refused_after, (name, answered_after, refused_after)
        log = bot.log.read_text()
        assert f"draining: /readyz answers 503; serving {DRAIN} s more" in log
        # Both turns are stored whole: a new process on the same data reads them.
        bot = bot_process(tmp_path, mock).start()
        try:
            for name in ("before", "during"):
                stored = httpx.get(
                    f"{bot.url}/v1/conversations/{name}", headers=AUTH, timeout=30
                ).json()
                assert [(m["turn"], m["role"]) for m in stored["messages"]] == [
                    (1, "user"),
                    (1, "assistant"),
                ]
        finally:
            bot.stop()


@pytest.mark.slow
def test_a_second_signal_ends_the_drain_at_once(tmp_path: Path) -> None:
    with mock_process(tmp_path) as mock:
        bot = bot_process(tmp_path, mock, BOT_DRAIN_DELAY="60").start()
        try:
            _signal(bot)
            until(lambda: _draining(bot), "the service handled the signal")
            assert not _refused(bot)
            started = time.monotonic()
            _signal(bot, signal.SIGINT)
            assert _exit_code(bot, 10) is not None
            assert time.monotonic() - started < 5
        finally:
            bot.stop()


@pytest.mark.slow
def test_without_a_drain_the_service_stops_accepting_at_once(tmp_path: Path) -> None:
    with mock_process(tmp_path) as mock:
        bot = bot_process(tmp_path, mock).start()  # BOT_DRAIN_DELAY: 0 by default
        try:
            assert httpx.get(f"{bot.url}/readyz", timeout=5).status_code == 200
            _signal(bot)
            # At once, not after a drain (8 s where operators set one): room for a busy machine.
            assert _wait_refused(bot, 10) < 4
            assert _exit_code(bot, 10) is not None
        finally:
            bot.stop()
        assert "draining" not in bot.log.read_text()


@pytest.mark.slow
def test_the_shutdown_timeout_bounds_how_long_running_turns_may_take(tmp_path: Path) -> None:
    with mock_process(tmp_path, latency_ms=4000) as mock:
        bot = bot_process(tmp_path, mock, BOT_SHUTDOWN_TIMEOUT="0.5").start()
        try:
            results: dict[str, object] = {}
            turn = _in_thread(results, "cut", bot)
            until(lambda: mock_requests(mock) == 1, "the turn waits for its answer")
            started = time.monotonic()
            _signal(bot)
            assert _exit_code(bot, 10) is not None
            stopped_after = time.monotonic() - started
            turn.join(30)
        finally:
            bot.stop()
        # The turn needed 3.5 s more; the process gave it 0.5 s, then cancelled it.
        assert stopped_after < 3, stopped_after
        response = results["cut"]
        assert not (isinstance(response, httpx.Response) and response.status_code == 200)
