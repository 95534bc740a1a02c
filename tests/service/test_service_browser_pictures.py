"""Pictures on the web page, in a real headless Chromium against the real service and the mock.

A picture attached with the page's button shows as a thumbnail in the tray, goes with the
question to a vision persona (the mock answers only a request carrying that picture, matched by
the hash of its bytes), shows in the sent message, and comes back when the conversation is
reloaded (fetched from the service's store). Skipped only when Chromium or its driver is not
installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_processes import TOKEN, Process, bot_process, mock_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("selenium.webdriver", reason="selenium (a dev dependency)")

from page_driver import CHROMEDRIVER, CHROMIUM, By, Page, chromium  # noqa: E402

from generic_framework.mock.fixture import Fixture  # noqa: E402

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

QUESTION = "What colour is this square?"
ANSWER = "It is a red square."
PROMPT = "You look at what you are shown."


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A real PNG of one colour (so the browser can draw its thumbnail)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


RED = png(24, 24, (220, 30, 30))


def fixture() -> dict[str, Any]:
    content = [
        {"type": "text", "text": QUESTION},
        {"type": "image_url", "image_url": {"url": "sha256:" + hashlib.sha256(RED).hexdigest()}},
    ]
    answer = {
        "id": "pic-1",
        "created": 1767950000,
        "model": "glm-4.6v",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": ANSWER},
            }
        ],
        "usage": {"prompt_tokens": 300, "completion_tokens": 8, "total_tokens": 308},
    }
    body = {
        "version": 1,
        "name": "page_picture",
        "model": "glm-4.6v",
        "persona": "seer",
        "user_input": QUESTION,
        "exchanges": [
            {
                "request": {
                    "method": "POST",
                    "path": "/api/paas/v4/chat/completions",
                    "body": {
                        "model": "glm-4.6v",
                        "messages": [
                            {"role": "system", "content": PROMPT},
                            {"role": "user", "content": content},
                        ],
                    },
                },
                "response": {"status": 200, "headers": {}, "body": answer},
            }
        ],
    }
    Fixture.model_validate(body)  # the mock would refuse a malformed file at start-up
    return body


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    tmp = tmp_path_factory.mktemp("pictures")
    fixtures = tmp / "fixtures"
    fixtures.mkdir()
    (fixtures / "page_picture.json").write_text(json.dumps(fixture()), encoding="utf-8")
    personas = tmp / "personas"
    personas.mkdir()
    (personas / "seer.toml").write_text(
        f'system_prompt = "{PROMPT}"\nmodel = "glm-4.6v"\n\n[web_search]\nmode = "off"\n',
        encoding="utf-8",
    )
    with (
        mock_process(tmp, fixtures=[fixtures]) as mock,
        bot_process(tmp, mock, PERSONAS_DIR=str(personas)) as served,
    ):
        yield served


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "desktop-profile") as driver:
        yield driver


def drawn(page: Page, css: str) -> list[str]:
    """The ``src`` of every picture matching ``css`` that the browser has decoded."""
    found = page.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".filter((i) => i.complete && i.naturalWidth > 0).map((i) => i.src)",
        css,
    )
    return list(found)


def test_a_picture_is_attached_answered_and_restored(
    desktop: Any, bot: Process, tmp_path: Path
) -> None:
    picture = tmp_path / "red.png"
    picture.write_bytes(RED)
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("seer")
    page.find("#picture-file").send_keys(str(picture))
    page.wait.until(lambda d: drawn(page, "#attachments img.thumb"))
    tray = drawn(page, "#attachments img.thumb")
    page.ask(QUESTION)
    answer = page.wait_answers(1)
    text = answer.find_element(By.CSS_SELECTOR, ".text").text
    page.wait.until(lambda d: drawn(page, ".msg.user .pictures img.thumb"))
    sent = drawn(page, ".msg.user .pictures img.thumb")
    tray_after = page.all("#attachments img")

    page.reload()
    page.wait_answers(1)
    page.wait.until(lambda d: drawn(page, ".msg.user .pictures img.thumb"))
    restored = drawn(page, ".msg.user .pictures img.thumb")
    restored_question = page.find(".msg.user").text

    assert text == ANSWER
    assert tray == sent and sent[0].startswith("data:image/png;base64,")
    assert tray_after == []  # the tray empties once the message is sent
    # Restored from the store: the same bytes, fetched from the service.
    assert restored == sent
    assert QUESTION in restored_question
