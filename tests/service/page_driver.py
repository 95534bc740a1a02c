"""Driving the chat page in a real headless Chromium (selenium), for the browser tests and
``scripts/screenshots.py``.

Chromium and its driver come from the system (``apt-get install chromium chromium-driver``);
selenium is given the driver's path, so it never tries to download one.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
DESKTOP = (1280, 800)
PHONE = (375, 740)

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "DESKTOP",
    "PHONE",
    "By",
    "Keys",
    "Page",
    "Select",
    "chromium",
    "ec",
]


@contextmanager
def chromium(profile: Path, size: tuple[int, int] = DESKTOP) -> Iterator[Any]:
    """A headless Chromium whose viewport is ``size`` (CSS pixels, device scale 1)."""
    assert CHROMIUM and CHROMEDRIVER, "chromium and chromedriver are needed"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
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
        "--force-device-scale-factor=1",
        "--hide-scrollbars",
        f"--window-size={size[0]},{size[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(profile.parent / "driver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        driver.set_page_load_timeout(60)
        # The viewport exactly (a window cannot be narrower than the browser's minimum width).
        metrics = {"width": size[0], "height": size[1], "deviceScaleFactor": 1}
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride", {**metrics, "mobile": size[0] < 600}
        )
        yield driver
    finally:
        driver.quit()


class Page:
    """The chat page in one browser: open it, ask, wait, read."""

    def __init__(self, driver: Any, url: str, token: str | None = None, timeout: float = 60):
        # Every wait is for a condition and only bounds a hang: a quiet machine leaves it at
        # once; under CPU and disk load a bot process's first answer took over 20 s.
        self.driver = driver
        self.url = url
        self.token = token
        self.wait = WebDriverWait(driver, timeout)

    def open(self) -> Page:
        self.driver.get(self.url if "#" in self.url else self.url + "/")
        if self.token:
            box = self.wait.until(ec.visibility_of_element_located((By.ID, "token")))
            box.send_keys(self.token, Keys.ENTER)
        self.wait.until(lambda d: len(self.persona.options) > 0)
        self.wait.until(lambda d: d.execute_script("return document.body.dataset.busy") == "false")
        return self

    def reload(self) -> None:
        self.driver.refresh()
        self.wait.until(lambda d: len(self.persona.options) > 0)

    def find(self, css: str) -> Any:
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    @property
    def persona(self) -> Select:
        return Select(self.driver.find_element(By.ID, "persona"))

    def ask(self, text: str) -> None:
        """Type ``text`` and press Enter (the keyboard, as a person would)."""
        box = self.driver.find_element(By.ID, "input")
        box.click()
        box.send_keys(text, Keys.ENTER)

    def answers(self, state: str = "done") -> list[Any]:
        return self.all(f".msg.assistant[data-state='{state}']")

    def wait_answers(self, count: int, state: str = "done") -> Any:
        """The ``count``-th answer in ``state``, once the newest answer has ended."""

        def ended(driver: Any) -> bool:
            newest = self.all(".msg.assistant")[-1:]
            return bool(newest) and newest[0].get_attribute("data-state") != "running"

        self.wait.until(lambda d: len(self.answers(state)) >= count or ended(d))
        found = self.answers(state)
        if len(found) < count:
            newest = self.all(".msg.assistant")[-1]
            got = newest.get_attribute("data-state")
            raise AssertionError(f"the answer ended {got!r}, not {state!r}: {newest.text!r}")
        return found[count - 1]

    def idle(self) -> bool:
        busy = self.driver.execute_script("return document.body.dataset.busy")
        return bool(busy == "false" and self.driver.find_element(By.ID, "send").is_enabled())

    def conversation_id(self) -> str:
        return str(self.driver.execute_script("return sessionStorage.getItem('gf-conversation')"))

    def active(self) -> Any:
        return self.driver.switch_to.active_element

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
        return path
