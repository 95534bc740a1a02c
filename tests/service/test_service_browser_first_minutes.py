"""A new user's first minutes on the page, in headless Chromium at 375x740 and 1280x800.

The offline banner stays compact, a reopened chat shows its newest answer, an unrecorded
question offline offers the chosen persona's recorded questions, the small things (the icon, a
refused link), and what chat pages are expected to do: a link per conversation (reload, back
and forward), copy, export, search, rename, regenerate and edit.
"""

from __future__ import annotations

import json
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
    Page,
    chromium,
    ec,
)
from page_fixture_factory import HOSTILE_QUESTION, MARKDOWN_QUESTION  # noqa: E402

from generic_framework.mock import bundled_fixtures_dir  # noqa: E402

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromium-driver are not installed", allow_module_level=True)

PAGE_FIXTURES = Path(__file__).resolve().parent / "page_fixtures"
NANAIMO = "// what's the weather in Nanaimo?"
CAPITAL = "What is the capital of Canada?"
HELPER_QUESTION = "What is 15% of 80?"
SIZES = [pytest.param(PHONE, id="375x740"), pytest.param(DESKTOP, id="1280x800")]

# The bottom of the newest message is inside the conversation's visible area.
NEWEST_IN_VIEW = """
const log = document.getElementById('log').getBoundingClientRect();
const last = document.getElementById('log').lastElementChild.getBoundingClientRect();
return last.bottom <= log.bottom + 1 && last.bottom > log.top;
"""


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Process, Process]]:
    """The bot on the mock (bundled and page fixtures), and an offline bot (no key: its
    embedded mock answers)."""
    tmp = tmp_path_factory.mktemp("first")
    (tmp / "offline").mkdir()
    with (
        mock_process(tmp, fixtures=[bundled_fixtures_dir(), PAGE_FIXTURES]) as mock,
        bot_process(tmp, mock) as bot,
        bot_process(tmp / "offline", mock, OPENAI_API_KEY="") as offline,
    ):
        yield bot, offline


@pytest.fixture
def bot(servers: tuple[Process, Process]) -> Process:
    return servers[0]


@pytest.fixture
def offline(servers: tuple[Process, Process]) -> Process:
    return servers[1]


@pytest.fixture(params=SIZES)
def browser(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    size = request.param
    with chromium(tmp_path / "profile", size) as driver:
        driver.size = size
        yield driver


def api(bot: Process, path: str) -> httpx.Response:
    return httpx.get(bot.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)


def height(page: Page, css: str) -> float:
    return float(page.driver.execute_script(f"return document.querySelector({css!r}).offsetHeight"))


def open_sidebar(page: Page) -> None:
    if page.driver.size == PHONE:
        page.find("#menu").click()
        page.wait.until(lambda d: page.find("#sidebar").is_displayed())


# ------------------------------------------------------------------ 1: the offline banner


def test_the_offline_banner_leaves_the_screen_to_the_chat(browser: Any, offline: Process) -> None:
    page = Page(browser, offline.url, TOKEN).open()
    menu = page.find("#examples-menu")
    assert menu.get_attribute("open") is not None  # an empty chat shows the questions
    assert height(page, "#offline") <= 0.45 * browser.size[1]
    page.all("#examples .example")[0].click()
    page.wait_answers(1)

    # Once a question is asked the banner is one line, and the chat has most of the screen.
    assert menu.get_attribute("open") is None
    assert height(page, "#offline") <= 60
    assert height(page, "#log") >= 0.5 * browser.size[1]
    assert browser.execute_script(NEWEST_IN_VIEW)
    # The questions are still one click away.
    page.find("#examples-menu summary").click()
    assert page.all("#examples .example")[0].is_displayed()


# ------------------------------------------------------------------ 2: a reopened chat


def test_a_reopened_chat_shows_its_newest_answer(browser: Any, bot: Process) -> None:
    page = Page(browser, bot.url, TOKEN).open()
    for number, question in enumerate((NANAIMO, CAPITAL, MARKDOWN_QUESTION), start=1):
        page.ask(question)
        page.wait_answers(number)
    cid = page.conversation_id()

    page.reload()
    page.wait.until(lambda d: len(page.answers()) >= 3)
    page.wait.until(lambda d: d.execute_script(NEWEST_IN_VIEW))

    # Through the sidebar: another conversation, then this one again.
    open_sidebar(page)
    page.find("#new-chat").click()
    open_sidebar(page)
    page.find(f"#conversations [data-id='{cid}']").click()
    page.wait.until(lambda d: len(page.answers()) >= 3)
    page.wait.until(lambda d: d.execute_script(NEWEST_IN_VIEW))


# ------------------------------------------------------------------ 3: offline errors


def test_an_unrecorded_question_offers_the_personas_own_questions(
    browser: Any, offline: Process
) -> None:
    page = Page(browser, offline.url, TOKEN).open()
    info = api(offline, "/v1/bot").json()
    page.persona.select_by_value("helper")
    shown = [e.get_attribute("textContent") for e in page.all("#examples .example")]
    assert shown == info["persona_examples"]["helper"] and HELPER_QUESTION in shown

    page.ask("Nothing recorded this.")
    failed = page.wait_answers(1, "error")
    line = failed.find_element(By.CSS_SELECTOR, ".error-line").text
    offered = [b.text for b in failed.find_elements(By.CSS_SELECTOR, ".offer .example")]
    assert line.startswith("Offline mode only knows its recorded questions")
    assert "did not accept" not in line
    assert offered == info["persona_examples"]["helper"][: len(offered)] and offered
    assert browser.execute_script(NEWEST_IN_VIEW)

    # An offered question is asked with the chosen persona, which answers it.
    failed.find_element(By.XPATH, f".//button[text()={HELPER_QUESTION!r}]").click()
    answer = page.wait_answers(1)
    assert "12" in answer.text
    assert page.persona.first_selected_option.get_attribute("value") == "helper"
    stored = api(offline, f"/v1/conversations/{page.conversation_id()}").json()
    assert stored["persona"] == "helper"


# ------------------------------------------------------------------ 4: small things


def test_no_missing_icon_and_a_refused_link_is_plain_text(browser: Any, bot: Process) -> None:
    page = Page(browser, bot.url, TOKEN).open()
    page.ask(HOSTILE_QUESTION)
    answer = page.wait_answers(1)
    text = answer.find_element(By.CSS_SELECTOR, ".text")
    anchors = text.find_elements(By.TAG_NAME, "a")
    assert "tempting link" in text.text
    assert all(a.get_attribute("href") for a in anchors)  # every link left links somewhere
    assert not [a for a in anchors if "tempting" in a.text]
    icon = browser.execute_script(
        "return fetch('/favicon.ico').then(r => r.status + ' ' + r.headers.get('content-type'))"
    )
    assert icon == "200 image/svg+xml"
    errors = [e["message"] for e in browser.get_log("browser") if "favicon" in e["message"]]
    assert errors == []


# ------------------------------------------------------------------ 5: what chat pages do


def test_each_conversation_has_a_link_that_reload_back_and_forward_follow(
    browser: Any, bot: Process
) -> None:
    page = Page(browser, bot.url, TOKEN).open()
    page.ask(CAPITAL)
    page.wait_answers(1)
    first = page.conversation_id()
    assert browser.current_url.endswith(f"/#/c/{first}")
    open_sidebar(page)
    page.find("#new-chat").click()
    page.ask(MARKDOWN_QUESTION)
    page.wait_answers(1)
    second = page.conversation_id()
    assert second != first and browser.current_url.endswith(f"/#/c/{second}")

    browser.back()
    page.wait.until(lambda d: d.current_url.endswith(first) and page.conversation_id() == first)
    page.wait.until(lambda d: CAPITAL in [e.text for e in page.all(".msg.user")])
    browser.forward()
    page.wait.until(lambda d: page.conversation_id() == second)
    page.wait.until(lambda d: MARKDOWN_QUESTION in [e.text for e in page.all(".msg.user")])

    # The link itself, in a fresh tab (which asks for the token): the conversation it names.
    browser.switch_to.new_window("tab")
    Page(browser, f"{bot.url}/#/c/{first}", TOKEN).open()
    page.wait.until(lambda d: [e.text for e in page.all(".msg.user")] == [CAPITAL])
    assert page.conversation_id() == first


def test_copy_and_export_an_answer(browser: Any, bot: Process, tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)}
    )
    browser.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": bot.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    page = Page(browser, bot.url, TOKEN).open()
    page.ask(NANAIMO)
    answer = page.wait_answers(1)
    answer.find_element(By.XPATH, ".//button[text()='Copy']").click()
    page.wait.until(lambda d: page.find("#status").text == "Answer copied.")
    copied = browser.execute_script("return navigator.clipboard.readText()")
    assert copied.startswith("Right now Nanaimo") and "[1]" in copied

    cid = page.conversation_id()
    for button in ("#export-md", "#export-json"):
        page.find("#export-menu summary").click()
        page.find(button).click()
    page.wait.until(lambda d: _downloaded(downloads, f"{cid}.md", f"{cid}.json"))
    markdown = (downloads / f"{cid}.md").read_text(encoding="utf-8")
    exported = json.loads((downloads / f"{cid}.json").read_text(encoding="utf-8"))
    assert markdown.startswith(f"# {NANAIMO}\n") and copied in markdown
    assert "1. [Nanaimo, BC - current conditions and forecast](https://" in markdown
    assert exported["id"] == cid and exported["turns"][0]["input"] == NANAIMO


def _downloaded(folder: Path, *names: str) -> bool:
    """Whether the browser has finished the downloads ``names`` into ``folder``: each there
    and not empty, none still being written (Chromium reserves the name with an empty file and
    writes to a ``.crdownload`` beside it until it is done)."""
    present = {p.name: p for p in folder.iterdir()}
    if any(name.endswith(".crdownload") for name in present):
        return False
    return all(name in present and present[name].stat().st_size > 0 for name in names)


def test_search_and_rename_in_the_sidebar(browser: Any, bot: Process) -> None:
    page = Page(browser, bot.url, TOKEN).open()
    page.ask(CAPITAL)
    page.wait_answers(1)
    cid = page.conversation_id()
    open_sidebar(page)
    page.find("#new-chat").click()
    page.ask(MARKDOWN_QUESTION)
    page.wait_answers(1)
    open_sidebar(page)
    page.wait.until(lambda d: len(page.all("#conversations .conversation")) >= 2)

    name = f"Capitals {cid[-6:]}"
    page.find(f"#conversations [data-id='{cid}'] + .rename").click()
    prompt = page.wait.until(lambda d: d.switch_to.alert)
    prompt.send_keys(name)
    prompt.accept()
    title = f"#conversations [data-id='{cid}'] .title"
    shown_title = f"return document.querySelector({title!r})?.textContent"
    page.wait.until(lambda d: d.execute_script(shown_title) == name)
    listed = api(bot, "/v1/conversations").json()["data"]
    assert [c["title"] for c in listed if c["id"] == cid] == [name]

    # The search box filters the list by title, whatever the case and the order of words.
    search = page.find("#search-chats")
    search.send_keys(f"{cid[-6:].upper()} capitals")
    shown = [e for e in page.all("#conversations .conversation") if e.is_displayed()]
    assert [e.get_attribute("data-id") for e in shown] == [cid]
    search.send_keys(" nothing-like-this")
    assert page.find("#no-match").is_displayed()
    search.clear()
    search.send_keys(" ")  # an input event with nothing to look for: everything again
    assert len([e for e in page.all("#conversations .conversation") if e.is_displayed()]) >= 2
    assert not page.find("#no-match").is_displayed()


def test_regenerate_and_edit_replace_the_last_turn(browser: Any, bot: Process) -> None:
    page = Page(browser, bot.url, TOKEN).open()
    page.ask(CAPITAL)
    page.wait_answers(1)
    page.ask(MARKDOWN_QUESTION)
    page.wait_answers(2)
    cid = page.conversation_id()
    assert len(page.all(".last-only")) == 2  # Regenerate and Edit, on the last turn only

    old = page.answers()[-1]
    old.find_element(By.XPATH, ".//button[text()='Regenerate']").click()
    page.wait.until(ec.staleness_of(old))
    page.wait.until(lambda d: page.idle() and len(page.answers()) == 2)
    page.wait.until(lambda d: len(page.all(".last-only")) == 2)
    stored = api(bot, f"/v1/conversations/{cid}").json()
    assert [t["input"] for t in stored["turns"]] == [CAPITAL, MARKDOWN_QUESTION]

    page.find(".msg.user ~ .edit.last-only").click()
    box = page.find("#input")
    assert box.get_attribute("value") == MARKDOWN_QUESTION and page.find("#editing").is_displayed()
    box.clear()
    old = page.answers()[-1]
    box.send_keys(NANAIMO, "\n")
    page.wait.until(ec.staleness_of(old))
    page.wait.until(lambda d: page.idle() and len(page.answers()) == 2)
    assert [e.text for e in page.all(".msg.user")] == [CAPITAL, NANAIMO]
    stored = api(bot, f"/v1/conversations/{cid}").json()
    assert [t["input"] for t in stored["turns"]] == [CAPITAL, NANAIMO]
    # The stored history is whole: each turn starts with the user's message, no stray tool.
    roles = [m["role"] for m in stored["messages"]]
    assert roles[0] == "user" and roles.count("user") == 2 and roles[-1] == "assistant"
    assert not page.find("#editing").is_displayed()
