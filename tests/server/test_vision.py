#!/usr/bin/env python3
"""Images through `loom serve` (issue 36): a synthetic Gemma 3 text model with a synthetic gemma3 mmproj
beside it (found without configuration), driven by the official `openai` client. An image in a chat
message is answered, streaming and not; the same image in the next turn is not encoded again and its
prompt blocks come from the prefix cache (usage and /metrics say so); /v1/models says the model takes
images; every bad image is a 400 naming the part and the limit, and the server keeps serving.
Skips (77) without the `openai` package.

usage: test_vision.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import base64
import os
import subprocess
import sys
import unittest


try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.path.join(ROOT, "tests", "data", "vision", "shapes-150x100.png")
MEDIA = os.path.join(TMP.name, "media")


def models():
    folder = os.path.join(TMP.name, "vlm")
    os.makedirs(folder, exist_ok=True)
    text, mmproj = os.path.join(folder, "text.gguf"), os.path.join(folder, "mmproj-synth.gguf")
    subprocess.run([ARGS.loom, "gguf", "synth", "--arch", "gemma3", "--layers", "6", "--dim", "128", "--heads", "4",
                    "--kv-heads", "1", "--head-dim", "64", "--ff", "256", "--vocab", "512", "--ctx", "512", "--seed", "41",
                    "--type", "F16", "--image-markers", "-o", text], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([ARGS.loom, "gguf", "synth-mmproj", "--text-dim", "128", "-o", mmproj], check=True, stdout=subprocess.DEVNULL)
    return text


def data_url(data, media_type="image/png"):
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def image_part(url):
    return {"type": "image_url", "image_url": {"url": url}}


class VisionServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(MEDIA, exist_ok=True)
        with open(IMAGE, "rb") as f:
            cls.png = f.read()
        with open(os.path.join(MEDIA, "shapes.png"), "wb") as f:
            f.write(cls.png)
        # The synthetic vocabulary has no chat markup: a template that writes the turns' text as is.
        template = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}\\n{% endfor %}"
        config = server_harness.write_config(
            "vision.toml", extra=f'max_images_per_request = 2\nallowed_local_media_path = "{MEDIA}"', kv_memory="8MiB")
        with open(config, "a") as f:
            f.write(f'\n[model]\nchat_template = "{template}"\n')
        cls.server = LoomServer(config, models())
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def chat(self, parts, **kw):
        return self.client.chat.completions.create(
            model="text", messages=[{"role": "user", "content": parts}], max_tokens=8, temperature=0, **kw)

    def assert_refused(self, parts, where, words):
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.chat(parts)
        message = str(ctx.exception)
        self.assertIn(where, message)
        for w in words:
            self.assertIn(w, message)
        # The server keeps serving.
        self.assertEqual(self.chat("the quick brown fox").choices[0].finish_reason, "length")

    def test_1_models_say_vision(self):
        card = self.client.models.list().data[0]
        self.assertIn("vision", card.model_extra["capabilities"])
        self.assertEqual(card.model_extra["loom"]["vision"]["image_rows"], 16)
        self.assertEqual(card.model_extra["loom"]["vision"]["projector"], "gemma3")

    def test_2_image_answered_then_cached_in_the_next_turn(self):
        parts = [{"type": "text", "text": "hello "}, image_part(data_url(self.png)), {"type": "text", "text": " the quick brown fox"}]
        before = self.server.metrics()
        first = self.chat(parts)
        self.assertEqual(first.choices[0].finish_reason, "length")
        self.assertEqual(first.usage.completion_tokens, 8)
        # BOS + "hello " (6) + <start_of_image> + 16 rows + <end_of_image> + the text + "\n".
        self.assertGreater(first.usage.prompt_tokens, 16 + 2)
        stream = self.chat(parts, stream=True, stream_options={"include_usage": True})
        text, usage = "", None
        for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            usage = chunk.usage or usage
        self.assertEqual(text, first.choices[0].message.content)
        self.assertGreaterEqual(usage.prompt_tokens_details.cached_tokens, 32)  # the image's blocks again
        after = self.server.metrics()
        self.assertEqual(after["loom_images_encoded_total"] - before["loom_images_encoded_total"], 1)
        self.assertEqual(after["loom_image_cache_hits_total"] - before["loom_image_cache_hits_total"], 1)
        self.assertGreater(after["loom_cached_prompt_tokens_total"], before["loom_cached_prompt_tokens_total"])

    def test_3_local_file_inside_the_allowed_folder(self):
        reply = self.chat([image_part("file://" + os.path.join(MEDIA, "shapes.png")), {"type": "text", "text": "what"}])
        self.assertEqual(reply.choices[0].finish_reason, "length")

    def test_4_bad_images_are_400s_naming_the_part(self):
        text = {"type": "text", "text": "what is it"}
        self.assert_refused([text, image_part(data_url(b"\x89PNG\r\n\x1a\nnot really"))], "messages[0].content[1]", ["PNG"])
        self.assert_refused([text, image_part(data_url(self.png[:len(self.png) // 2]))], "messages[0].content[1]", [])
        self.assert_refused([text, image_part(data_url(b"GIF89a....", "image/gif"))], "messages[0].content[1]", [])
        self.assert_refused([text, image_part("https://example.com/cat.png")], "messages[0].content[1]", ["data: URL"])
        self.assert_refused([text, image_part("file:///etc/passwd")], "messages[0].content[1]", ["allowed_local_media_path"])
        self.assert_refused([image_part(data_url(self.png))] * 3, "messages[0].content[2]", ["at most 2", "max_images_per_request"])
        self.assert_refused([text, {"type": "image_url"}], "messages[0].content[1]", ["image_url"])


    def test_5_the_marker_typed_by_a_user_is_text(self):
        # mtmd's "<__media__>" in a user's words is text: one image part, one image, answered.
        reply = self.chat([{"type": "text", "text": "what does <__media__> mean here? "}, image_part(data_url(self.png))])
        self.assertEqual(reply.choices[0].finish_reason, "length")
        self.assertEqual(self.chat("<__media__> <__media__>").choices[0].finish_reason, "length")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS])
