"""Screenshots of the web chat page for the docs: ``python scripts/screenshots.py [DIR]``.

Starts the mock (bundled and page test fixtures) and the bot service on loopback ports, drives
the page in headless Chromium (``apt-get install chromium chromium-driver``) and writes into
DIR (default ``docs/screenshots``):

- online: ``desktop-chat.png`` (1280x800), ``phone-chat.png`` and ``phone-sidebar.png``
  (375x740);
- offline (no key, the embedded mock): ``desktop-offline.png`` and ``phone-offline.png``, a
  recorded answer and an unrecorded question with the persona's recorded questions offered, and
  ``phone-offline-start.png``, the first visit with the recorded questions open.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "service"))

from page_driver import DESKTOP, PHONE, Page, chromium  # noqa: E402
from page_fixture_factory import MARKDOWN_QUESTION  # noqa: E402
from service_processes import TOKEN, Process, bot_process, mock_process  # noqa: E402

from generic_framework.mock import bundled_fixtures_dir  # noqa: E402

NANAIMO = "// what's the weather in Nanaimo?"


def _chat(bot: Process, tmp: Path, out: Path) -> None:
    with chromium(tmp / "desktop", DESKTOP) as driver:
        page = Page(driver, bot.url, TOKEN).open()
        page.ask("What is the capital of Canada?")
        page.wait_answers(1)
        page.find("#new-chat").click()
        page.ask(NANAIMO)
        page.wait_answers(1)
        page.ask(MARKDOWN_QUESTION)
        page.wait_answers(2)
        page.wait.until(lambda d: len(page.all("#conversations .conversation")) == 2)
        page.screenshot(out / "desktop-chat.png")
        conversation = page.conversation_id()
    with chromium(tmp / "phone", PHONE) as driver:
        page = Page(driver, bot.url, TOKEN).open()
        page.find("#menu").click()
        page.wait.until(lambda d: page.find("#sidebar").is_displayed())
        page.find(f"#conversations [data-id='{conversation}']").click()
        page.wait_answers(2)
        page.screenshot(out / "phone-chat.png")
        page.find("#menu").click()
        page.wait.until(lambda d: page.find("#sidebar").is_displayed())
        page.screenshot(out / "phone-sidebar.png")


def _offline_page(bot: Process, tmp: Path, name: str, out: Path) -> None:
    size = PHONE if name == "phone" else DESKTOP
    with chromium(tmp / f"offline-{name}", size) as driver:
        page = Page(driver, bot.url, TOKEN).open()
        page.wait.until(lambda d: page.find("#offline").is_displayed())
        if name == "phone":
            page.screenshot(out / "phone-offline-start.png")
        page.all("#examples .example")[0].click()
        page.wait_answers(1)
        page.ask("What will the weather be like next year?")
        page.wait_answers(1, "error")
        page.screenshot(out / f"{name}-offline.png")


def _offline(mock: Process, tmp: Path, out: Path) -> None:
    with bot_process(tmp, mock, OPENAI_API_KEY="") as bot:
        _offline_page(bot, tmp, "desktop", out)
        _offline_page(bot, tmp, "phone", out)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    fixtures = [bundled_fixtures_dir(), ROOT / "tests" / "service" / "page_fixtures"]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        with mock_process(tmp, fixtures=fixtures) as mock:
            with bot_process(tmp, mock) as bot:
                _chat(bot, tmp, out)
            (tmp / "offline").mkdir()
            _offline(mock, tmp / "offline", out)
    for path in sorted(out.glob("*.png")):
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots")
