"""The page with users: sign in with a key, see who is signed in and only one's own chats, an
admin's user switcher, sign out (headless Chromium against the real service and the mock).

Screenshots go to ``$GF_SCREENSHOTS_DIR`` when set (docs/screenshots/), else the test's tmp dir.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from service_processes import REPO, TOKEN, Process, bot_process, mock_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("selenium.webdriver", reason="selenium (a dev dependency)")

from page_driver import CHROMEDRIVER, CHROMIUM, By, Keys, Page, Select, chromium, ec  # noqa: E402

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("chromium and chromium-driver are not installed", allow_module_level=True)

CAPITAL = "What is the capital of Canada?"
PERCENT = "// what is 17% of 2,340?"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Process, dict[str, str]]]:
    with mock_process(tmp_path) as mock, bot_process(tmp_path, mock) as bot:
        keys = {}
        for name in ("alice", "bob"):
            made = subprocess.run(
                [sys.executable, "-m", "generic_framework", "keys", "create", "--user", name],
                capture_output=True, text=True, env=bot.env, cwd=REPO, timeout=60, check=True,
            )  # fmt: skip
            keys[name] = made.stdout.strip().splitlines()[-1]
        yield bot, keys


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as driver:
        yield driver


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("GF_SCREENSHOTS_DIR") or tmp_path / "screenshots")


def _titles(page: Page) -> list[str] | None:
    """The listed titles; None while the list is being drawn again (an element found, then
    replaced before its text was read), so that a wait reads it once more."""
    try:
        return [e.text for e in page.all("#conversations .conversation .title")]
    except StaleElementReferenceException:
        return None


def _wait_titles(page: Page, titles: list[str]) -> None:
    page.wait.until(lambda d: _titles(page) == titles)


def test_sign_in_own_chats_switcher_and_sign_out(
    browser: Any, stack: tuple[Process, dict[str, str]], shots: Path
) -> None:
    bot, keys = stack
    alice = Page(browser, bot.url, token=keys["alice"]).open()
    alice.wait.until(lambda d: alice.find("#who").text == "Signed in as alice")
    assert not alice.find("#user-switch").is_displayed()
    alice.ask(CAPITAL)
    alice.wait_answers(1)
    _wait_titles(alice, [CAPITAL])
    assert keys["alice"] not in browser.current_url
    stored = browser.execute_script("return sessionStorage.getItem('gf-token')")
    assert stored == keys["alice"]
    alice.screenshot(shots / "desktop-signed-in.png")

    # Sign out: the key leaves the tab, nothing of alice's stays on the page.
    alice.find("#sign-out").click()
    alice.wait.until(ec.visibility_of_element_located((By.ID, "token")))
    assert browser.execute_script("return sessionStorage.getItem('gf-token')") is None
    assert _titles(alice) == [] and alice.all(".msg") == []
    alice.screenshot(shots / "desktop-sign-in.png")

    # Bob signs in in the same tab: only his chats (none yet), then his own.
    alice.find("#token").send_keys(keys["bob"], Keys.ENTER)
    alice.wait.until(lambda d: alice.find("#who").text == "Signed in as bob")
    alice.wait.until(lambda d: alice.find("#no-conversations").is_displayed())
    assert _titles(alice) == []
    alice.ask(PERCENT)
    alice.wait_answers(1)
    _wait_titles(alice, [PERCENT])

    # The admin (BOT_API_TOKEN) sees a switcher; choosing alice lists only alice's chats.
    alice.find("#sign-out").click()
    alice.wait.until(ec.visibility_of_element_located((By.ID, "token")))
    alice.find("#token").send_keys(TOKEN, Keys.ENTER)
    alice.wait.until(lambda d: alice.find("#who").text == "Signed in as admin (admin)")
    switcher = Select(alice.find("#user-switch"))
    alice.wait.until(lambda d: len(switcher.options) == 3)
    assert [o.get_attribute("value") for o in switcher.options] == ["admin", "alice", "bob"]
    assert _titles(alice) == []
    switcher.select_by_value("alice")
    _wait_titles(alice, [CAPITAL])
    alice.all("#conversations .conversation")[0].click()
    alice.wait_answers(1)
    assert "Ottawa" in alice.answers()[0].text
    alice.screenshot(shots / "desktop-admin-switcher.png")
    switcher.select_by_value("bob")
    _wait_titles(alice, [PERCENT])


def test_a_wrong_or_revoked_key_says_why_sign_in_failed(
    browser: Any, stack: tuple[Process, dict[str, str]]
) -> None:
    bot, keys = stack
    page = Page(browser, bot.url)
    browser.get(bot.url + "/")
    box = page.wait.until(ec.visibility_of_element_located((By.ID, "token")))
    # A first visit tried no key: nothing failed yet.
    assert not page.find("#token-error").is_displayed()
    # Sending before signing in says to sign in, not to pick a persona.
    page.ask(CAPITAL)
    page.wait.until(lambda d: page.find("#status").text != "")
    assert page.find("#status").text == "Sign in first: enter your API key above, then send."

    box.send_keys("gfk_000000000000_" + "0" * 32, Keys.ENTER)
    page.wait.until(lambda d: page.find("#token-error").is_displayed())
    assert page.find("#token-error").text.startswith(
        "Sign-in failed: the API key is missing, wrong or revoked."
    )
    assert browser.execute_script("return sessionStorage.getItem('gf-token')") is None

    # The right key signs in and the failure is gone; signing out says nothing failed.
    page.find("#token").send_keys(keys["alice"], Keys.ENTER)
    page.wait.until(lambda d: page.find("#who").text == "Signed in as alice")
    assert not page.find("#token-error").is_displayed()
    page.find("#sign-out").click()
    page.wait.until(ec.visibility_of_element_located((By.ID, "token")))
    assert not page.find("#token-error").is_displayed()

    # A revoked key is refused with the same words.
    subprocess.run(
        [sys.executable, "-m", "generic_framework", "keys", "revoke", keys["bob"]],
        env=bot.env, cwd=REPO, timeout=60, check=True, capture_output=True,
    )  # fmt: skip
    page.find("#token").send_keys(keys["bob"], Keys.ENTER)
    page.wait.until(lambda d: page.find("#token-error").is_displayed())
    assert "wrong or revoked" in page.find("#token-error").text
