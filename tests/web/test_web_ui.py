#!/usr/bin/env python3
"""Issues 23 and 34: the chat page (GET /) and the engine page (GET /engine) in a real browser.

Headless Chromium (Debian's chromium + chromedriver, Selenium from PyPI) against `loom serve` on a
synthetic model, loopback only:
  - the pages and their shared assets (/assets/loom.css, /assets/loom.js: fetched once per page, with
    their content types, Cache-Control and ETag; no longer inlined) weigh under 200 KB together and
    load with no console errors;
  - before the first message the conversation pane fills the window, the composer at the bottom;
  - the synthetic model has no chat template, so the page shows the template notice with the server's note;
  - a typed message gets a streamed answer with its TTFT and tokens/s shown;
  - Stop in the middle of a long answer cancels it on the server (KV blocks back to zero, the
    cancellation counted in /metrics);
  - /engine shows running requests and a generation rate while a load runs, and idle figures after;
  - with an API key set, each page first shows the server's 401 message and asks for the key; with
    the key it works;
  - on a model with a vision encoder, an attached image is previewed, sent and answered (issue 36);
  - with several models ([[models]]) a picker names each with its state and a message goes to the
    chosen one, which the server loads (issue 39).
Then chat_model_answers.py sends five everyday prompts through the page to the default chat model
(skipped, with a line saying so, when it is not installed).
Screenshots go to --artifacts. Skips (77) when Chromium, chromedriver or Selenium is missing.
"""
import argparse
import json
import os
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import server_harness as h  # noqa: E402

from web_driver import (CHROMIUM, DRIVER, By, assistant_messages, browser, chat_layout, console_errors,  # noqa: E402
                        idle, resources_fetched, send, set_field, shot, wait, wait_model_loaded)
import chat_model_answers  # noqa: E402

ASSETS = {"/assets/loom.css": "text/css", "/assets/loom.js": "text/javascript"}
# Pieces of what loom.css and loom.js hold; a page that still has one inline has a stale copy.
SHARED_PIECES = ("--error-bg", "#api-key-dialog {", "function apiFetch", "<dialog", 'id="error-banner"')


def check_assets(driver, server):
    """loom.css and loom.js are served once each, and both pages link them instead of a copy inline."""
    weight = 0
    for path, content_type in ASSETS.items():
        status, headers, body = server.request("GET", path)
        print(f"{path}: {status}, {len(body)} bytes, {headers.get('Content-Type')}, "
              f"Cache-Control {headers.get('Cache-Control')}, ETag {headers.get('ETag')}")
        assert status == 200 and headers.get("Content-Type", "").startswith(content_type), (path, status, headers)
        assert headers.get("Cache-Control") and headers.get("ETag"), headers
        status, _, unchanged = server.request("GET", path, headers={"If-None-Match": headers["ETag"]})
        assert status == 304 and not unchanged, f"{path} with its own ETag: {status}, {len(unchanged)} bytes"
        weight += len(body)
    for page in ("/", "/engine"):
        html = urllib.request.urlopen(server.base + page, timeout=10).read().decode()
        weight += len(html)
        assert '<link rel="stylesheet" href="/assets/loom.css">' in html, f"{page} does not link loom.css"
        assert '<script src="/assets/loom.js"></script>' in html, f"{page} does not load loom.js"
        inline = [piece for piece in SHARED_PIECES if piece in html]
        assert not inline, f"{page} still inlines the shared {inline}"
        driver.get(server.base + page)
        wait(driver).until(lambda d: d.execute_script("return document.readyState") == "complete")
        for path in ASSETS:
            fetched = resources_fetched(driver, path)
            assert fetched == 1, f"{page} fetched {path} {fetched} times"
        assert driver.find_elements(By.ID, "error-banner") and driver.find_elements(By.ID, "api-key-dialog"), \
            f"loom.js did not add the banner and the dialog to {page}"
    print(f"pages and assets weigh {weight} bytes")
    assert weight < 200 * 1024, weight


def check_fills_window(driver, when):
    """Before the first message the conversation pane reaches down to the composer, which sits at the
    bottom of the window (it once stopped at the sidebar's height, half the window)."""
    edges = chat_layout(driver)
    print(f"layout {when}: {edges}")
    assert abs(edges["chat"] - edges["window"]) <= 2, f"the chat pane ends at {edges['chat']} of {edges['window']} px"
    assert abs(edges["composer"] - edges["window"]) <= 2, f"the composer ends at {edges['composer']} px, not at the bottom"
    assert abs(edges["messages"] - edges["composerTop"]) <= 2, "a gap between the messages and the composer"
    assert edges["messages"] - edges["messagesTop"] > 0.5 * edges["window"], f"the messages pane is short: {edges}"
    assert driver.find_element(By.CSS_SELECTOR, "#messages .empty-hint").is_displayed()


def check_template_banner(driver, server, artifacts):
    """The synthetic model has no chat template: the page says so, with the server's note, as a notice."""
    wait(driver).until(lambda d: d.find_element(By.ID, "template-banner").is_displayed())
    banner = driver.find_element(By.ID, "template-banner").text
    status, models = server.json("GET", "/v1/models")
    origin = models["data"][0]["loom"]["chat_template"]
    print(f"template banner: {banner!r}")
    assert status == 200 and origin["source"] == "builtin", origin
    for words in ("no chat template", "built-in template", "instruction-tuned", "/v1/completions", origin["note"]):
        assert words in banner, f"the template banner lacks {words!r}: {banner!r}"
    assert not driver.find_element(By.ID, "error-banner").is_displayed(), "the notice came as an error"
    shot(driver, artifacts, "chat-empty-template-banner")


def check_chat(driver, server, artifacts):
    driver.get(server.base + "/")
    wait_model_loaded(driver)
    assert idle(driver)
    check_template_banner(driver, server, artifacts)
    check_fills_window(driver, "with the template banner")
    driver.find_element(By.CSS_SELECTOR, "#template-banner .dismiss").click()
    check_fills_window(driver, "with no banner")
    shot(driver, artifacts, "chat-empty")
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
        # The assets are no secret: a page must be able to show its 401 banner before it has the key.
        assert all(server.request("GET", path)[0] == 200 for path in ASSETS), "the assets ask for the API key"
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

        # The engine page, through the same loom.js: the 401 banner and the prompt, then polling with the key.
        driver.execute_script("sessionStorage.clear()")
        driver.get(server.base + "/engine")
        wait(driver).until(lambda d: d.find_element(By.ID, "api-key-dialog").is_displayed())
        banner = driver.find_element(By.ID, "error-banner").text
        assert server_message in banner, f"engine banner {banner!r} lacks the server's {server_message!r}"
        driver.find_element(By.ID, "api-key-input").send_keys("sesame")
        driver.find_element(By.ID, "api-key-save").click()
        wait(driver).until(lambda d: "blocks" in d.find_element(By.ID, "kv-text").text)
        shot(driver, artifacts, "engine-after-key")
        errors = [e for e in console_errors(driver) if "401" not in e["message"]]
        assert not errors, f"console errors: {errors}"
    finally:
        server.terminate()


def check_image_attach(driver, artifacts):
    """Issue 36: on a model with a vision encoder the page offers Attach image; a chosen PNG shows as a
    preview, goes with the message as an image_url part and is answered; the encoder ran once, and
    regenerating the answer sends the same image again from the encoder's cache."""
    folder = os.path.join(h.TMP.name, "vlm")
    os.makedirs(folder, exist_ok=True)
    text = os.path.join(folder, "text.gguf")
    h.run_loom("gguf", "synth", "--arch", "gemma3", "--layers", "6", "--dim", "128", "--heads", "4", "--kv-heads", "1",
               "--head-dim", "64", "--ff", "256", "--vocab", "512", "--ctx", "512", "--type", "F16", "--image-markers",
               "-o", text, check=True)
    h.run_loom("gguf", "synth-mmproj", "--text-dim", "128", "-o", os.path.join(folder, "mmproj.gguf"), check=True)
    config = h.write_config("web-vision.toml", extra='model_name = "vlm"', kv_memory="8MiB")
    server = h.LoomServer(config, text)
    image = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "vision", "shapes-150x100.png")
    try:
        driver.get(server.base + "/")
        wait(driver).until(lambda d: d.find_element(By.ID, "model-name").text.strip() == "vlm")
        wait(driver).until(lambda d: d.find_element(By.ID, "attach-button").is_displayed())
        set_field(driver, "max-tokens", 8)
        # Greedy: a sampled answer from this random model is sometimes EOS at once (an empty answer).
        set_field(driver, "temperature", 0)
        driver.find_element(By.ID, "image-input").send_keys(os.path.abspath(image))
        wait(driver).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attachments .attachment img")) == 1)
        shot(driver, artifacts, "chat-image-attached")
        send(driver, "what is in the picture?")
        wait(driver, 60).until(lambda d: len(assistant_messages(d)) == 1 and idle(d))
        assert driver.find_elements(By.CSS_SELECTOR, ".message.user .images img"), "the sent message shows no image"
        assert not driver.find_elements(By.CSS_SELECTOR, "#attachments .attachment"), "the preview stayed after sending"
        answer = assistant_messages(driver)[0].find_element(By.CSS_SELECTOR, ".content").text.strip()
        assert answer, "no answer to the image"
        driver.find_element(By.ID, "regenerate-button").click()
        wait(driver, 60).until(lambda d: len(assistant_messages(d)) == 1 and idle(d))
        metrics = server.metrics()
        print(f"image chat: answer {answer!r}, encoded {metrics['loom_images_encoded_total']:.0f}, "
              f"cache hits {metrics['loom_image_cache_hits_total']:.0f}")
        assert metrics["loom_images_encoded_total"] == 1 and metrics["loom_image_cache_hits_total"] >= 1, metrics
        shot(driver, artifacts, "chat-image-answered")
        # The engine page counts the encoder's work and its cache.
        driver.get(server.base + "/engine")
        wait(driver).until(lambda d: "1 encoded" in d.find_element(By.ID, "vision-detail").text)
        detail = driver.find_element(By.ID, "vision-detail").text
        print(f"engine page: {detail!r}")
        assert "from the encoder cache" in detail and "16 rows per image" in detail, detail
        errors = console_errors(driver)
        assert not errors, f"console errors: {errors}"
    finally:
        server.terminate()


def check_model_picker(driver, artifacts):
    """Issue 39: with several models ([[models]]) the page offers a picker naming each with its state; a
    message goes to the chosen model, which the server loads (unloading the other under the budget)."""
    paths = {}
    for name, layers in (("alpha", 2), ("beta", 3)):
        paths[name] = os.path.join(h.TMP.name, f"picker-{name}.gguf")
        h.run_loom("gguf", "synth", "--arch", "llama", "--layers", str(layers), "--dim", "64", "--heads", "4", "--kv-heads", "2",
                   "--ff", "128", "--vocab", "512", "--ctx", "512", "-o", paths[name], check=True)
    budget = os.path.getsize(paths["beta"]) + (6 << 20)  # one model with its 4 MiB pool, not two
    config = h.write_config("web-models.toml", extra=f"memory_budget = {budget}")
    with open(config, "a") as f:
        f.write(f'\n[[models]]\nname = "alpha"\npath = "{paths["alpha"]}"\npreload = true\n')
        f.write(f'\n[[models]]\nname = "beta"\npath = "{paths["beta"]}"\n')
    server = h.LoomServer(config, None)
    picker_options = lambda d: [o.text for o in d.find_elements(By.CSS_SELECTOR, "#model-picker option")]
    try:
        driver.get(server.base + "/")
        wait(driver).until(lambda d: d.find_element(By.ID, "model-picker").is_displayed())
        assert picker_options(driver) == ["alpha", "beta (unloaded)"], picker_options(driver)
        assert not driver.find_element(By.ID, "model-name").is_displayed(), "the single-model label shows beside the picker"
        shot(driver, artifacts, "chat-model-picker")
        from selenium.webdriver.support.ui import Select
        Select(driver.find_element(By.ID, "model-picker")).select_by_value("beta")
        set_field(driver, "max-tokens", 8)
        set_field(driver, "temperature", 0)
        send(driver, "hello beta")
        wait(driver, 60).until(lambda d: len(assistant_messages(d)) == 1 and idle(d))
        wait(driver).until(lambda d: picker_options(d) == ["alpha (unloaded)", "beta"])
        assert Select(driver.find_element(By.ID, "model-picker")).first_selected_option.get_attribute("value") == "beta"
        metrics = server.metrics()
        beta_loads = metrics['loom_model_loads_total{model="beta"}']
        print(f"picker: {picker_options(driver)}; beta loads {beta_loads:.0f}")
        assert metrics['loom_model_loaded{model="beta"}'] == 1 and metrics['loom_model_loaded{model="alpha"}'] == 0, metrics
        assert metrics['loom_requests_total{model="beta",outcome="finished"}'] == 1, metrics
        shot(driver, artifacts, "chat-model-picked")
        errors = console_errors(driver)
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
        check_assets(driver, server)
        check_chat(driver, server, args.artifacts)
        check_engine(driver, server, args.artifacts)
        errors = console_errors(driver)
        assert not errors, f"console errors: {errors}"
        check_api_key(driver, model, args.artifacts)
        check_image_attach(driver, args.artifacts)
        check_model_picker(driver, args.artifacts)
    finally:
        driver.quit()
        code = server.terminate()
    assert code == 0, f"loom serve exited with {code}\n{server.log()}"
    chat_model_answers.check(args.artifacts)
    print("PASS")


if __name__ == "__main__":
    main()
