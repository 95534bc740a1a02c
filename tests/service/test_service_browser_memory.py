"""The page's Memory panel in a real headless Chromium against ``serve --mock`` with the keeper
persona (personas/examples/keeper.toml): a fact the persona remembers in a chat is listed, one
added by hand too, a too long one is refused in words, and deleting one removes it for good."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from service_processes import PERSONAS, Process, base_env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("selenium.webdriver", reason="selenium (a dev dependency)")

from page_driver import CHROMEDRIVER, CHROMIUM, By, Keys, Page, chromium  # noqa: E402

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromium-driver are not installed", allow_module_level=True)

FACT = "The user's cat is called Miso."


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[Process]:
    environment = {
        **base_env(tmp_path),
        "PERSONAS_DIR": str(PERSONAS / "examples"),
        "DATA_DIR": str(tmp_path / "data"),
    }
    command = ["serve", "--mock", "--host", "127.0.0.1", "--port", "0"]
    with Process(command, tmp_path / "bot.log", environment, tmp_path) as process:
        yield process


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as driver:
        yield driver


def _kept(page: Page) -> list[str] | None:
    """The listed facts; None while the list is drawn again, so that a wait reads it anew."""
    try:
        return [e.text for e in page.all("#memories li .memory-text")]
    except StaleElementReferenceException:
        return None


def test_the_memory_panel_lists_adds_and_deletes(browser: Any, bot: Process) -> None:
    page = Page(browser, bot.url).open()
    page.persona.select_by_value("keeper")
    page.find("#memory-panel summary").click()
    page.wait.until(lambda d: page.find("#no-memories").is_displayed())
    assert page.find("#memory-persona").text == "(keeper)"
    # The persona remembers in a chat; the panel shows it once the turn has ended.
    page.ask("Remember that my cat is called Miso.")
    page.wait_answers(1)
    page.wait.until(lambda d: _kept(page) == [FACT])
    # Added by hand: listed newest first.
    box = page.find("#memory-input")
    box.send_keys("Likes green tea", Keys.ENTER)
    page.wait.until(lambda d: _kept(page) == ["Likes green tea", FACT])
    # Refused in the service's words, nothing added.
    box.send_keys("my key is sk-abcdefghijklmnop", Keys.ENTER)
    page.wait.until(lambda d: page.find("#memory-note").is_displayed())
    assert "key, a token" in page.find("#memory-note").text
    assert _kept(page) == ["Likes green tea", FACT]
    # Deleting the remembered fact removes it from the page and from the service.
    [item] = [li for li in page.all("#memories li") if li.text.startswith(FACT)]
    item.find_element(By.CSS_SELECTOR, "button.memory-delete").click()
    page.wait.until(lambda d: _kept(page) == ["Likes green tea"])
    listed = httpx.get(f"{bot.url}/v1/memories?persona=keeper", timeout=30).json()["data"]
    assert [m["text"] for m in listed] == ["Likes green tea"]
