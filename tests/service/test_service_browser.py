"""The web page in a real headless Chromium against the real service and the mock.

A `//` question with its sources and a reload that restores them (with the `//` and the
persona), the sidebar switching between conversations, the stop button on a stalled stream,
markdown rendered as HTML elements, hostile answers and sources kept as text, the offline
banner, the phone width and the keyboard. Screenshots go to ``$GF_SCREENSHOTS_DIR`` when set,
else to the test's tmp dir. Skipped only when Chromium or its driver is not installed
(``.ci/run`` installs them).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_processes import TOKEN, Process, bot_process, mock_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("selenium.webdriver", reason="selenium (a dev dependency)")

from page_driver import (  # noqa: E402
    CHROMEDRIVER,
    CHROMIUM,
    DESKTOP,
    PHONE,
    By,
    Keys,
    Page,
    chromium,
    ec,
)
from page_fixture_factory import (  # noqa: E402
    HOSTILE_QUESTION,
    MARKDOWN_QUESTION,
    SLOW_QUESTION,
)
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402

from generic_framework.mock import bundled_fixtures_dir  # noqa: E402

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip(
        "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

PAGE_FIXTURES = Path(__file__).resolve().parent / "page_fixtures"
NANAIMO = "// what's the weather in Nanaimo?"
NANAIMO_URLS = [
    "https://weather.example.ca/city/nanaimo",
    "https://www.forecast.example.com/ca/bc/nanaimo/hourly",
    "https://news.example.org/vancouver-island-weather",
]
CAPITAL = "What is the capital of Canada?"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Process]]:
    """The mock (bundled and page fixtures) and the bot, whose default persona is ``helper``
    (so a restored ``scout`` conversation shows that the persona came back from the store)."""
    tmp = tmp_path_factory.mktemp("page")
    fixtures = [bundled_fixtures_dir(), PAGE_FIXTURES]
    with (
        mock_process(tmp, fixtures=fixtures) as mock,
        bot_process(tmp, mock, BOT_DEFAULT_PERSONA="helper") as bot,
    ):
        yield mock, bot


@pytest.fixture
def bot(servers: tuple[Process, Process]) -> Process:
    return servers[1]


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("GF_SCREENSHOTS_DIR") or tmp_path / "screenshots")


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "desktop-profile", DESKTOP) as driver:
        yield driver


@pytest.fixture
def phone(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "phone-profile", PHONE) as driver:
        yield driver


def api(bot: Process, path: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.get(bot.url + path, headers=headers, timeout=10)


def sources(answer: Any) -> list[tuple[str | None, str]]:
    return [
        (a.get_attribute("href"), a.get_attribute("rel"))
        for a in answer.find_elements(By.CSS_SELECTOR, ".sources a")
    ]


def test_web_question_then_reload_restores_prefix_sources_and_persona(
    desktop: Any, bot: Process, shots: Path
) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    assert page.persona.first_selected_option.get_attribute("value") == "helper"  # the default
    page.persona.select_by_value("scout")
    page.ask(NANAIMO)
    answer = page.wait_answers(1)
    asked = page.find(".msg.user").text
    text = answer.find_element(By.CSS_SELECTOR, ".text").text
    links = sources(answer)
    cites = [a.get_attribute("href") for a in answer.find_elements(By.CSS_SELECTOR, "a.cite")]
    # A marker links to its source: following it focuses that source.
    answer.find_element(By.CSS_SELECTOR, "a.cite").click()
    focused = page.active().get_attribute("id")
    page.screenshot(shots / "desktop-answer.png")
    cid = page.conversation_id()

    page.reload()
    restored = page.wait_answers(1)
    restored_user = [e.text for e in page.all(".msg.user")]
    restored_text = restored.find_element(By.CSS_SELECTOR, ".text").text
    restored_links = sources(restored)
    persona = page.persona.first_selected_option.get_attribute("value")
    current = page.find("#conversations .conversation[aria-current='true']")

    assert asked == NANAIMO
    assert "Nanaimo" in text and "[1]" in text and "ref_" not in text
    assert links == [(url, "noopener noreferrer") for url in NANAIMO_URLS]
    assert [c.rsplit("#", 1)[1] for c in cites if c] == [f"{focused[:-1]}{n}" for n in (1, 2, 3)]
    assert restored_user == [NANAIMO]  # as typed, `//` kept
    assert restored_text == text
    assert restored_links == links
    assert persona == "scout"  # the conversation's persona, not the default
    assert current.get_attribute("data-id") == cid
    assert NANAIMO in current.text


def test_sidebar_switches_conversations_and_markdown_renders(
    desktop: Any, bot: Process, shots: Path
) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("scout")
    page.ask(MARKDOWN_QUESTION)
    markdown = page.wait_answers(1).find_element(By.CSS_SELECTOR, ".text")
    rendered = {
        "strong": [e.text for e in markdown.find_elements(By.TAG_NAME, "strong")],
        "code": [e.text for e in markdown.find_elements(By.CSS_SELECTOR, "p code")],
        "li": [e.text for e in markdown.find_elements(By.TAG_NAME, "li")],
        "pre": [e.text for e in markdown.find_elements(By.TAG_NAME, "pre")],
    }
    first = page.conversation_id()

    page.find("#new-chat").click()
    assert page.all(".msg") == []
    assert page.persona.first_selected_option.get_attribute("value") == "helper"
    page.persona.select_by_value("scout")
    page.ask(CAPITAL)
    page.wait_answers(1)
    second = page.conversation_id()
    page.wait.until(lambda d: len(page.all(f"#conversations [data-id='{second}']")) == 1)
    page.screenshot(shots / "desktop-sidebar.png")

    page.find(f"#conversations [data-id='{first}']").click()
    page.wait.until(lambda d: page.all(".msg.user") and page.find(".msg.user").text != CAPITAL)
    shown_first = [e.text for e in page.all(".msg.user")]
    page.find(f"#conversations [data-id='{second}']").click()
    page.wait.until(lambda d: page.all(".msg.user") and page.find(".msg.user").text == CAPITAL)
    shown_second = page.wait_answers(1).find_element(By.CSS_SELECTOR, ".text").text

    assert rendered == {
        "strong": ["bold claim"],
        "code": ["inline code"],
        "li": ["the first item", "the second item"],
        "pre": ['print("hello")'],
    }
    assert first != second
    assert shown_first == [MARKDOWN_QUESTION]
    assert page.conversation_id() == second
    assert "Ottawa" in shown_second


def test_search_toggle_tool_progress_and_delete(desktop: Any, bot: Process) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("scout")
    # Every text the progress line shows, however briefly.
    desktop.execute_script(
        "window.__progress = [];"
        "new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach((n) => {"
        # Each text set is a new text node, recorded with the element it was added to.
        "  if (n.nodeType === 3 && r.target.classList.contains('progress'))"
        "    window.__progress.push(n.data); })))"
        ".observe(document.getElementById('log'), {subtree: true, childList: true});"
    )
    page.find("#search").click()  # the toggle turns a plain question into a `//` one
    page.ask("what is 17% of 2,340?")
    answered = page.wait_answers(1).text
    progress = desktop.execute_script("return window.__progress")
    asked = page.find(".msg.user").text
    cid = page.conversation_id()

    page.find(f"#conversations [data-id='{cid}'] ~ .delete").click()
    desktop.switch_to.alert.accept()
    page.wait.until(lambda d: not page.all(f"#conversations [data-id='{cid}']"))

    assert asked == "// what is 17% of 2,340?"
    assert "397.8" in answered
    assert "Searching the web…" in progress
    assert any(p.startswith("calculate done") for p in progress)
    assert api(bot, f"/v1/conversations/{cid}").status_code == 404
    assert page.all(".msg") == [] and page.conversation_id() != cid  # a new chat


def test_stop_cancels_the_turn_and_the_page_is_idle_again(desktop: Any, bot: Process) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("scout")
    page.ask(SLOW_QUESTION)
    # The stream stalls after three chunks: some text is there and the turn is still running.
    page.wait.until(lambda d: "lighthouse" in page.find(".msg.assistant .text").text)
    assert page.find("#stop").is_displayed() and not page.idle()
    cid = page.conversation_id()

    page.find("#stop").click()
    stopped = page.wait_answers(1, "stopped")
    page.wait.until(lambda d: page.idle())
    assert not page.find("#stop").is_displayed()
    assert "not kept" in stopped.text and "lighthouse" in stopped.text  # the partial text stays

    # The service cancelled the turn: nothing stored, and the conversation answers again (the
    # deadline bounds a hang only).
    deadline = time.monotonic() + 30
    while api(bot, f"/v1/conversations/{cid}").status_code != 404 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert api(bot, f"/v1/conversations/{cid}").status_code == 404
    page.ask(MARKDOWN_QUESTION)
    assert "bold claim" in page.wait_answers(1).text
    assert api(bot, f"/v1/conversations/{cid}").json()["turns"][0]["input"] == MARKDOWN_QUESTION


def test_hostile_answer_and_sources_stay_text(desktop: Any, bot: Process) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("scout")
    page.ask(HOSTILE_QUESTION)
    answer = page.wait_answers(1)
    text = answer.find_element(By.CSS_SELECTOR, ".text").text
    first_source = answer.find_element(By.CSS_SELECTOR, ".sources li:first-child")
    hrefs = [a.get_attribute("href") or "" for a in page.all("#log a")]
    pwned = desktop.execute_script("return window.__pwned")
    elements = desktop.execute_script(
        "return document.querySelectorAll('#log script, #log img, #log [onerror]').length"
    )

    assert pwned is None  # no script ran
    assert elements == 0
    assert "<script>window.__pwned = 1</script>" in text  # shown, as text
    assert '<img src="x" onerror="window.__pwned=3">' in text
    assert "tempting link" in text
    assert not [h for h in hrefs if h.lower().startswith("javascript:")]
    assert "https://fine.example.org/page" in hrefs
    assert "<script>window.__pwned = 4</script>Evil title" in first_source.text
    assert first_source.find_elements(By.TAG_NAME, "a") == []  # a javascript: url links nothing


def test_phone_width_keyboard_and_friendly_errors(phone: Any, bot: Process, shots: Path) -> None:
    page = Page(phone, bot.url, TOKEN).open()
    width = phone.execute_script("return document.documentElement.scrollWidth")
    assert width <= PHONE[0]
    assert not page.find("#sidebar").is_displayed() and page.find("#menu").is_displayed()

    # Keyboard only: Shift+Enter adds a line, Enter sends.
    page.persona.select_by_value("scout")
    box = page.find("#input")
    box.click()
    box.send_keys("line one", Keys.SHIFT, Keys.ENTER, Keys.SHIFT, "line two")
    assert box.get_attribute("value") == "line one\nline two"
    box.clear()
    box.send_keys(NANAIMO, Keys.ENTER)
    page.wait_answers(1)
    assert phone.execute_script("return document.documentElement.scrollWidth") <= PHONE[0]
    page.screenshot(shots / "phone-answer.png")

    # An upstream failure: one friendly line, the details folded away.
    page.ask("Write a haiku about the sea.")
    failed = page.wait_answers(1, "error")
    line = failed.find_element(By.CSS_SELECTOR, ".error-line").text
    details = failed.find_element(By.CSS_SELECTOR, ".error details")
    assert line == "The bot's model account cannot be used right now; tell its operator."
    assert details.get_attribute("open") is None
    details.find_element(By.TAG_NAME, "summary").click()
    assert "HTTP 403" in details.text and "1113" in details.text

    # The sidebar opens from the menu button and is reachable by Tab.
    page.find("#menu").send_keys(Keys.ENTER)
    page.wait.until(lambda d: page.find("#sidebar").is_displayed())
    assert page.active().get_attribute("id") == "new-chat"
    page.active().send_keys(Keys.TAB)
    assert page.active().get_attribute("id") == "search-chats"
    page.active().send_keys(Keys.TAB)
    assert "conversation" in (page.active().get_attribute("class") or "")
    page.screenshot(shots / "phone-sidebar.png")
    page.active().send_keys(Keys.ESCAPE)
    assert not page.find("#sidebar").is_displayed()
    assert page.find("#menu").get_attribute("aria-expanded") == "false"


def test_desktop_tab_order_reaches_the_sidebar(desktop: Any, bot: Process) -> None:
    page = Page(desktop, bot.url, TOKEN).open()
    page.persona.select_by_value("scout")
    page.ask(CAPITAL)
    page.wait_answers(1)
    page.reload()  # the token is kept for the tab: focus starts at the top of the page
    page.wait.until(lambda d: page.all("#conversations .conversation"))
    order = []
    for _ in range(6):
        ActionChains(desktop).send_keys(Keys.TAB).perform()
        order.append(page.active().get_attribute("id") or page.active().get_attribute("class"))
    # The admin's (BOT_API_TOKEN) user switcher and sign-out come first in the sidebar.
    assert order == ["skip", "user-switch", "sign-out", "new-chat", "search-chats", "conversation"]
    # Enter on the skip link lands in the message box.
    desktop.execute_script("document.querySelector('.skip').focus()")
    ActionChains(desktop).send_keys(Keys.ENTER).perform()
    assert page.active().get_attribute("id") == "input"


def test_offline_banner_lists_the_recorded_questions(
    desktop: Any, servers: tuple[Process, Process], tmp_path: Path, shots: Path
) -> None:
    mock = servers[0]
    # No API key: the bot says it is offline (its answers can only be recorded ones).
    with bot_process(tmp_path, mock, OPENAI_API_KEY="") as offline:
        info = api(offline, "/v1/bot").json()
        page = Page(desktop, offline.url, TOKEN).open()
        banner = page.wait.until(ec.visibility_of_element_located((By.ID, "offline")))
        examples = [e.text for e in page.all("#examples .example")]
        persona = page.persona.first_selected_option.get_attribute("value")
        page.screenshot(shots / "desktop-offline.png")
        page.all("#examples .example")[0].click()
        asked = page.wait.until(lambda d: page.all(".msg.user"))[0].text
        page.wait.until(lambda d: page.idle())
        ended = page.all(".msg.assistant")[0].get_attribute("data-state")

    assert info["offline"] is True and info["default_persona"] == "scout"
    assert "Offline" in banner.text
    assert examples == info["examples"] and NANAIMO in examples
    assert persona == "scout"  # the first persona that searches the web, not `helper`
    assert asked == examples[0]
    assert ended == "done"  # the embedded mock answers its recorded question
