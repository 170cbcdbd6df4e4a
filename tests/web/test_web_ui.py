#!/usr/bin/env python3
"""Issue 23: the chat page (GET /) and the engine page (GET /engine) in a real browser.

Headless Chromium (Debian's chromium + chromedriver, Selenium from PyPI) against `loom serve` on a
synthetic model, loopback only:
  - the pages weigh under 200 KB together and load with no console errors;
  - a typed message gets a streamed answer with its TTFT and tokens/s shown;
  - Stop in the middle of a long answer cancels it on the server (KV blocks back to zero, the
    cancellation counted in /metrics);
  - /engine shows running requests and a generation rate while a load runs, and idle figures after;
  - with an API key set, the page first shows the server's 401 message and asks for the key; with
    the key it works.
Screenshots go to --artifacts. Skips (77) when Chromium, chromedriver or Selenium is missing.
"""
import argparse
import json
import os
import shutil
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as h  # noqa: E402

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
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


def check_chat(driver, server, artifacts):
    driver.get(server.base + "/")
    wait(driver).until(lambda d: d.find_element(By.ID, "model-name").text.strip() != "")
    assert idle(driver)
    set_field(driver, "max-tokens", 24)
    send(driver, "Hello there, who are you?")
    wait(driver, 60).until(lambda d: len(assistant_messages(d)) == 1 and idle(d))
    answer = assistant_messages(driver)[0]
    text = answer.find_element(By.CSS_SELECTOR, ".content").text
    stats = answer.find_element(By.CSS_SELECTOR, ".stats").text
    print(f"answer: {text[:60]!r}...; stats: {stats!r}")
    assert text.strip(), "the streamed answer is empty"
    assert "TTFT" in stats and "tok/s" in stats, f"no TTFT / tok/s in {stats!r}"
    shot(driver, artifacts, "chat-answer")

    # Stop a long answer midway: the server must cancel it and free its KV blocks.
    before = server.metrics()
    set_field(driver, "max-tokens", 1500)
    send(driver, "Tell me a very long story.")
    wait(driver, 30).until(lambda d: len(assistant_messages(d)) == 2 and
                           len(assistant_messages(d)[1].find_element(By.CSS_SELECTOR, ".content").text) > 20)
    assert not idle(driver), "the long answer finished before Stop could be pressed"
    driver.find_element(By.ID, "stop-button").click()
    wait(driver, 10).until(idle)
    after = server.wait_kv_free(10)
    assert after["loom_kv_blocks_used"] == 0, after["loom_kv_blocks_used"]
    key = 'loom_requests_cancelled_total{reason="client_disconnected"}'
    assert after.get(key, 0) > before.get(key, 0), f"Stop did not cancel the request on the server ({key})"
    generated = after["loom_generation_tokens_total"] - before["loom_generation_tokens_total"]
    assert generated < 1500, f"{generated} tokens generated: the request ran to the end"
    print(f"stopped after {generated:.0f} tokens; KV blocks used {after['loom_kv_blocks_used']:.0f}")
    shot(driver, artifacts, "chat-stopped")


def load(server, stop, n_threads=3):
    def worker():
        while not stop.is_set():
            try:
                server.request("POST", "/v1/completions",
                               {"model": "m", "prompt": "a b c d e f g", "max_tokens": 200, "temperature": 1.0},
                               timeout=60)
            except Exception:
                pass
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(n_threads)]
    for t in threads:
        t.start()
    return threads


def check_engine(driver, server, artifacts):
    driver.get(server.base + "/engine")
    wait(driver).until(lambda d: d.find_element(By.ID, "running").text.strip() != "")
    wait(driver).until(lambda d: "blocks" in d.find_element(By.ID, "kv-text").text)
    idle_running = driver.find_element(By.ID, "running").text
    model_text = driver.find_element(By.ID, "model").text
    plugins = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#plugins li")]
    print(f"engine page idle: running {idle_running}, model {model_text!r}, plugins {plugins}")
    assert idle_running.strip().startswith("0"), idle_running
    assert any("backend" in p for p in plugins), plugins
    stop = threading.Event()
    threads = load(server, stop)
    try:
        wait(driver, 30).until(lambda d: d.find_element(By.ID, "running").text.strip() not in ("", "0"))
        wait(driver, 30).until(lambda d: float((d.find_element(By.ID, "tokens-per-second").text.split() or ["0"])[0]) > 0)
        busy = {i: driver.find_element(By.ID, i).text for i in ("running", "tokens-per-second", "kv-text")}
        print("engine page under load:", busy)
        shot(driver, artifacts, "engine-busy")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    wait(driver, 30).until(lambda d: d.find_element(By.ID, "running").text.strip().startswith("0"))
    shot(driver, artifacts, "engine-idle")


def check_api_key(driver, model, artifacts):
    config = h.write_config("web-key.toml", extra='api_key = "sesame"\nmodel_name = "m"')
    server = h.LoomServer(config, model)
    try:
        driver.get(server.base + "/")
        wait(driver).until(lambda d: d.find_element(By.ID, "error-banner").is_displayed())
        banner = driver.find_element(By.ID, "error-banner").text
        status, _, body = server.request("GET", "/v1/models")
        server_message = json.loads(body)["error"]["message"]
        print(f"401 banner: {banner!r}")
        assert status == 401 and server_message in banner, f"banner {banner!r} lacks the server's {server_message!r}"
        wait(driver).until(lambda d: d.find_element(By.ID, "api-key-dialog").is_displayed())
        shot(driver, artifacts, "chat-401")
        driver.find_element(By.ID, "api-key-input").send_keys("sesame")
        driver.find_element(By.ID, "api-key-save").click()
        wait(driver).until(lambda d: d.find_element(By.ID, "model-name").text.strip() == "m")
        set_field(driver, "max-tokens", 8)
        send(driver, "hi")
        wait(driver, 60).until(lambda d: len(assistant_messages(d)) == 1 and idle(d))
        assert assistant_messages(driver)[0].find_element(By.CSS_SELECTOR, ".content").text.strip()
        errors = [e for e in console_errors(driver) if "401" not in e["message"]]
        assert not errors, f"console errors: {errors}"
    finally:
        server.terminate()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", required=True)
    ap.add_argument("--plugins", required=True)
    ap.add_argument("--artifacts", default=os.path.join(os.getcwd(), "web-artifacts"))
    args = ap.parse_args()
    if not CHROMIUM or not DRIVER:
        print("SKIP: chromium and chromedriver are needed (apt-get install chromium chromium-driver)")
        sys.exit(77)
    os.makedirs(args.artifacts, exist_ok=True)
    h.configure(args.loom, args.plugins)
    # Big enough that a long answer takes seconds (so Stop lands midway), small enough to load fast.
    model = os.path.join(h.TMP.name, "web.gguf")
    h.run_loom("gguf", "synth", "--arch", "llama", "--layers", "8", "--dim", "512", "--heads", "8", "--kv-heads", "4",
               "--ff", "1536", "--vocab", "2048", "--ctx", "2048", "--type", "Q8_0", "-o", model, check=True)
    config = h.write_config("web.toml", extra='model_name = "m"', kv_memory="64MiB")
    server = h.LoomServer(config, model)
    driver = browser()
    try:
        weight = sum(len(urllib.request.urlopen(server.base + p, timeout=10).read()) for p in ("/", "/engine"))
        print(f"pages weigh {weight} bytes")
        assert weight < 200 * 1024, weight
        check_chat(driver, server, args.artifacts)
        check_engine(driver, server, args.artifacts)
        errors = console_errors(driver)
        assert not errors, f"console errors: {errors}"
        check_api_key(driver, model, args.artifacts)
    finally:
        driver.quit()
        code = server.terminate()
    assert code == 0, f"loom serve exited with {code}\n{server.log()}"
    print("PASS")


if __name__ == "__main__":
    main()
