"""The web page in a real headless Chromium: a `//` question against the mock, answered with
sources. Skipped only when Chromium or its driver is not installed (``.ci/run`` installs them).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_processes import TOKEN, bot_process, mock_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (a dev dependency)")

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1100,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    # An explicit driver path: selenium must not try to download one.
    driver = webdriver.Chrome(
        options=options,
        service=Service(
            executable_path=str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")
        ),
    )
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()


def test_web_search_question_answered_with_source_links(browser: Any, tmp_path: Path) -> None:
    # Latency keeps each model call visible long enough to watch the progress line.
    with mock_process(tmp_path, latency_ms=600) as mock, bot_process(tmp_path, mock) as bot:
        wait = WebDriverWait(browser, 20)
        browser.get(bot.url + "/")
        # The API needs a token: the page asks for it.
        token_input = wait.until(ec.visibility_of_element_located((By.ID, "token")))
        token_input.send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: len(Select(d.find_element(By.ID, "persona")).options) == 2)
        assert not browser.find_element(By.ID, "token-form").is_displayed()
        Select(browser.find_element(By.ID, "persona")).select_by_value("scout")
        assert "//" in browser.find_element(By.CSS_SELECTOR, ".hint").text

        # The toggle turns the plain question into a `//` web query.
        browser.find_element(By.ID, "search").click()
        browser.find_element(By.ID, "input").send_keys("what's the weather in Nanaimo?")
        browser.find_element(By.ID, "send").click()

        answer = wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, ".msg.assistant[data-state='done']"))
        )
        user = browser.find_element(By.CSS_SELECTOR, ".msg.user").text
        text = answer.find_element(By.CSS_SELECTOR, ".text").text
        links = [
            (a.get_attribute("href"), a.get_attribute("rel"))
            for a in answer.find_elements(By.CSS_SELECTOR, ".sources a")
        ]
        screenshot = tmp_path / "web-page-answer.png"
        browser.save_screenshot(str(screenshot))
        print(f"\nscreenshot: {screenshot}\npage answer: {text}")

        # A question that runs a tool: the progress line names it while the next call runs.
        browser.find_element(By.ID, "input").send_keys("// what is 17% of 2,340?")
        browser.find_element(By.ID, "send").click()
        second = ".msg.assistant:nth-of-type(4)"
        wait.until(
            ec.text_to_be_present_in_element((By.CSS_SELECTOR, f"{second} .progress"), "calculate")
        )
        wait.until(
            ec.presence_of_element_located((By.CSS_SELECTOR, f"{second}[data-state='done']"))
        )
        tool_answer = browser.find_element(By.CSS_SELECTOR, f"{second} .text").text

        # A reload keeps the tab's conversation: the stored questions and answers come back.
        browser.refresh()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#log .msg")) == 4)
        restored = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#log .msg")]

    assert user == "// what's the weather in Nanaimo?"
    assert "Nanaimo" in text and "[1]" in text
    assert links[0] == ("https://weather.example.ca/city/nanaimo", "noopener noreferrer")
    assert len(links) == 3
    assert screenshot.stat().st_size > 1000
    assert "397.8" in tool_answer
    assert restored[0] == "what's the weather in Nanaimo?"  # stored without the `//`
    assert restored[1] == text
    assert "397.8" in restored[3]
