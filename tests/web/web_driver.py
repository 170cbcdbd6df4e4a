"""Driving Loom's web pages in headless Chromium: starting the browser, waiting, typing into the chat
page, reading its answers and its layout. Shared by test_web_ui.py and chat_model_answers.py; importing
it exits with 77 (skip) when Selenium is missing."""
import json
import os
import shutil
import sys

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    print("SKIP: selenium is not installed (pip install selenium)")
    sys.exit(77)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)


def browser():
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def shot(driver, artifacts, name):
    path = os.path.join(artifacts, name + ".png")
    driver.save_screenshot(path)
    print("screenshot:", path)


def wait(driver, seconds=30):
    return WebDriverWait(driver, seconds, poll_frequency=0.1)


def idle(driver):
    return driver.execute_script("return document.body.dataset.state") == "idle"


def assistant_messages(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#messages .message.assistant")


def set_field(driver, element_id, value):
    field = driver.find_element(By.ID, element_id)
    field.clear()
    field.send_keys(str(value))


def send(driver, text):
    box = driver.find_element(By.ID, "message-input")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "send-button").click()


def wait_model_loaded(driver):
    """Until the page has read /v1/models (and so decided on the template banner)."""
    wait(driver).until(lambda d: d.find_element(By.ID, "model-name").text.strip() not in ("", "loading…"))


def stored_answer(driver, prompt):
    """The raw markdown of the last answer to `prompt`, as the page keeps it in localStorage."""
    conversations = json.loads(driver.execute_script("return localStorage.getItem('loom.conversations')") or "[]")
    for conversation in conversations:
        messages = conversation["messages"]
        for question, answer in zip(messages, messages[1:]):
            if question["role"] == "user" and question["content"] == prompt and answer["role"] == "assistant":
                return answer["content"]
    raise AssertionError(f"no stored answer to {prompt!r}")


# Edges of the chat page's parts, in CSS pixels from the top of the viewport.
LAYOUT_SCRIPT = """
const bottom = (selector) => document.querySelector(selector).getBoundingClientRect().bottom;
const top = (selector) => document.querySelector(selector).getBoundingClientRect().top;
return {window: window.innerHeight, chat: bottom('.chat'), messagesTop: top('#messages'),
        messages: bottom('#messages'), composerTop: top('.composer'), composer: bottom('.composer')};
"""


def chat_layout(driver):
    return driver.execute_script(LAYOUT_SCRIPT)


def resources_fetched(driver, suffix):
    """How many times this page load fetched a URL ending in `suffix` (the Resource Timing entries)."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').filter((e) => e.name.endsWith(arguments[0])).length", suffix)
