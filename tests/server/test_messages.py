#!/usr/bin/env python3
"""Issue 40: Anthropic's Messages API, driven by the official `anthropic` client.

On a synthetic llama (greedy):
  - messages.create answers with a text block, a stop reason and usage; messages.stream's events
    (message_start, content_block_start/delta/stop, message_delta, message_stop) add up to the same
    message; count_tokens counts what /v1/chat/completions/render renders for the same chat;
  - system prompts, image-free content blocks and stop_sequences are read; a max_tokens past the
    context is a ceiling, not a refusal; errors come in Anthropic's shape (missing max_tokens, an
    unknown model as a 404, a bad block type, a field of the wrong type);
  - with an API key, the client's x-api-key is accepted and a wrong one is an authentication error.
On the default chat model (Qwen2.5-Coder 0.5B Instruct; skipped when it is not installed), a tool
round trip: a forced tool_use block with its input parsed, streamed and whole alike, then the
tool_result answered with text, the same text /v1/chat/completions gives for that conversation.
Skips (77) without the `anthropic` package.
usage: test_messages.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
"""
import json
import os
import re
import sys
import unittest

try:
    import anthropic
except ImportError:
    print("skipped: the anthropic package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()

WEATHER = {"name": "get_weather", "description": "The current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def streamed(client, **kw):
    events = []
    with client.messages.stream(**kw) as stream:
        for event in stream:
            events.append(event.type)
        return stream.get_final_message(), events


class MessagesOnASyntheticModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = server_harness.shared_synth()
        cls.server = LoomServer(server_harness.write_config("messages.toml"), cls.model, ["--model-name", "m"])
        cls.client = anthropic.Anthropic(base_url=cls.server.base, api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def ask(self, **kw):
        # The client no longer takes temperature (newer Claude models ignore it); Loom still reads it.
        args = dict(model="m", max_tokens=12, extra_body={"temperature": 0}, system="You are terse.",
                    messages=[{"role": "user", "content": [{"type": "text", "text": "hello there"}]}])
        args.update(kw)
        return args

    def test_create_and_stream_agree(self):
        whole = self.client.messages.create(**self.ask())
        self.assertEqual(whole.type, "message")
        self.assertEqual(whole.role, "assistant")
        self.assertEqual(whole.model, "m")
        self.assertEqual([b.type for b in whole.content], ["text"])
        self.assertIn(whole.stop_reason, ("end_turn", "max_tokens"))
        self.assertGreater(whole.usage.input_tokens, 0)
        self.assertGreater(whole.usage.output_tokens, 0)
        final, events = streamed(self.client, **self.ask())
        self.assertEqual(events[0], "message_start")
        self.assertEqual(events[-1], "message_stop")
        for kind in ("content_block_start", "content_block_delta", "content_block_stop", "message_delta"):
            self.assertIn(kind, events)
        self.assertEqual(final.content[0].text, whole.content[0].text)
        self.assertEqual(final.stop_reason, whole.stop_reason)
        self.assertEqual(final.usage.output_tokens, whole.usage.output_tokens)

    def test_count_tokens_counts_the_rendered_chat(self):
        counted = self.client.messages.count_tokens(model="m", system="You are terse.",
                                                    messages=[{"role": "user", "content": "hello there"}])
        status, rendered = self.server.json("POST", "/v1/chat/completions/render", {
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]})
        self.assertEqual(status, 200, rendered)
        self.assertEqual(counted.input_tokens, rendered["count"])

    def test_stop_sequences_end_the_text(self):
        whole = self.client.messages.create(**self.ask(max_tokens=24))
        text = whole.content[0].text
        self.assertGreater(len(text), 4)
        cut = self.client.messages.create(**self.ask(max_tokens=24, stop_sequences=[text[2:4]]))
        self.assertEqual(cut.content[0].text if cut.content else "", text[:text.index(text[2:4])])

    def test_max_tokens_past_the_context_is_a_ceiling(self):
        # Agents send a large max_tokens whatever the prompt: it is cut to the context, not refused.
        # (The client refuses a whole answer of that size without a timeout: the body goes raw.)
        status, whole = self.server.json("POST", "/v1/messages", {"model": "m", "max_tokens": 100000, "temperature": 0,
                                                                  "ignore_eos": True, "messages": [{"role": "user", "content": "hello"}]})
        self.assertEqual(status, 200, whole)
        self.assertEqual(whole["stop_reason"], "max_tokens")
        usage = whole["usage"]
        self.assertEqual(usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["output_tokens"], 512)

    def test_errors_come_in_anthropic_shape(self):
        with self.assertRaises(anthropic.NotFoundError) as caught:
            self.client.messages.create(**self.ask(model="claude-nope"))
        self.assertEqual(caught.exception.body["error"]["type"], "not_found_error")
        self.assertIn("'m'", caught.exception.body["error"]["message"])
        status, out = self.server.json("POST", "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        self.assertEqual((status, out["type"], out["error"]["type"]), (400, "error", "invalid_request_error"))
        self.assertIn("max_tokens", out["error"]["message"])
        status, out = self.server.json("POST", "/v1/messages", {"model": "m", "max_tokens": 4, "messages": [
            {"role": "user", "content": [{"type": "video", "url": "x"}]}]})
        self.assertEqual(status, 400, out)
        self.assertIn("messages.0.content.0.type", out["error"]["message"])
        status, out = self.server.json("POST", "/v1/messages", {"model": "m", "max_tokens": 4, "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "y", "is_error": "yes"}]}]})
        self.assertEqual((status, out["error"]["type"]), (400, "invalid_request_error"), out)


class ThinkingBlocks(unittest.TestCase):
    """A thinking template (server_harness.THINKING_TEMPLATE) and a reply forced by guided_regex: the
    reasoning comes back as a thinking block before the text, whole and streamed alike."""

    @classmethod
    def setUpClass(cls):
        cls.model = server_harness.shared_synth()
        cls.server = LoomServer(server_harness.write_thinking_config("messages-think.toml"), cls.model, ["--model-name", "m"])
        cls.client = anthropic.Anthropic(base_url=cls.server.base, api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_thinking_whole_and_streamed(self):
        kw = dict(model="m", max_tokens=40, thinking={"type": "enabled", "budget_tokens": 1024},
                  messages=[{"role": "user", "content": "Is 2 even?"}],
                  extra_body={"guided_regex": re.escape("Two is even.</think>\n\nYes")})
        whole = self.client.messages.create(**kw)
        self.assertEqual([(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in whole.content],
                         [("thinking", "Two is even."), ("text", "Yes")])
        final, events = streamed(self.client, **kw)
        self.assertIn("content_block_delta", events)
        self.assertEqual([(b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in final.content],
                         [("thinking", "Two is even."), ("text", "Yes")])
        # Thinking disabled: the template closes <think> itself and the reply is all text.
        off = self.client.messages.create(model="m", max_tokens=5, thinking={"type": "disabled"},
                                          messages=[{"role": "user", "content": "x"}], extra_body={"guided_regex": "Yes"})
        self.assertEqual([b.type for b in off.content], ["text"])


class MessagesWithAnApiKey(unittest.TestCase):
    def test_x_api_key_is_the_key(self):
        model = server_harness.synth(os.path.join(server_harness.TMP.name, "keyed.gguf"), 512)
        server = LoomServer(server_harness.write_config("keyed.toml", extra='api_key = "sesame"'), model, ["--model-name", "m"])
        try:
            good = anthropic.Anthropic(base_url=server.base, api_key="sesame", max_retries=0)
            reply = good.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
            self.assertEqual(reply.type, "message")
            bad = anthropic.Anthropic(base_url=server.base, api_key="wrong", max_retries=0)
            with self.assertRaises(anthropic.AuthenticationError) as caught:
                bad.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "hi"}])
            self.assertEqual(caught.exception.body["error"]["type"], "authentication_error")
        finally:
            server.terminate()


class ToolRoundTrip:
    """On an installed model (RECORD, see server_harness.installed_model): a forced tool call, whole and
    streamed alike, and its result answered as /v1/chat/completions answers the same conversation."""
    RECORD = None

    @classmethod
    def setUpClass(cls):
        path = server_harness.installed_model(cls.RECORD)
        if path is None:
            raise unittest.SkipTest(f"{cls.RECORD} names no installed model (scripts/setup.sh)")
        cls.server = LoomServer(server_harness.write_config("messages-" + cls.RECORD + ".toml", kv_memory="64MiB"), path,
                                ["--model-name", "coder"])
        cls.client = anthropic.Anthropic(base_url=cls.server.base, api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_a_tool_call_and_its_result(self):
        question = {"role": "user", "content": "What is the weather in Paris?"}
        ask = dict(model="coder", max_tokens=64, extra_body={"temperature": 0}, tools=[WEATHER],
                   tool_choice={"type": "tool", "name": "get_weather"}, messages=[question])
        whole = self.client.messages.create(**ask)
        self.assertEqual(whole.stop_reason, "tool_use")
        calls = [b for b in whole.content if b.type == "tool_use"]
        self.assertEqual(len(calls), 1, whole.content)
        self.assertEqual(calls[0].name, "get_weather")
        self.assertIsInstance(calls[0].input.get("city"), str)
        final, events = streamed(self.client, **ask)
        streamed_calls = [b for b in final.content if b.type == "tool_use"]
        self.assertEqual([(c.name, c.input) for c in streamed_calls], [(c.name, c.input) for c in calls])
        self.assertIn("content_block_delta", events)
        # The input streams as the model writes it: several input_json_delta pieces, which the client joins.
        self.assertGreater(events.count("input_json"), 1, events)
        # The input streams as the model writes it: several input_json_delta pieces, which the client joins.
        self.assertGreater(events.count("input_json"), 1, events)

        answer = self.client.messages.create(model="coder", max_tokens=48, extra_body={"temperature": 0}, tools=[WEATHER], messages=[
            question,
            {"role": "assistant", "content": [{"type": "tool_use", "id": calls[0].id, "name": "get_weather", "input": calls[0].input}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id, "content": "Sunny, 24 degrees Celsius"}]},
        ])
        text = "".join(b.text for b in answer.content if b.type == "text")
        print(f"{self.RECORD}: tool round trip: {calls[0].input} -> {text!r}")
        self.assertTrue(text.strip(), answer.content)
        # The same conversation through /v1/chat/completions gets the same reply: the blocks were read
        # as the chat messages they stand for.
        status, chat = self.server.json("POST", "/v1/chat/completions", {
            "model": "coder", "max_tokens": 48, "temperature": 0,
            "tools": [{"type": "function", "function": {"name": WEATHER["name"], "description": WEATHER["description"],
                                                        "parameters": WEATHER["input_schema"]}}],
            "messages": [question,
                         {"role": "assistant", "content": None, "tool_calls": [{"id": calls[0].id, "type": "function", "function": {
                             "name": "get_weather", "arguments": json.dumps(calls[0].input)}}]},
                         {"role": "tool", "tool_call_id": calls[0].id, "content": "Sunny, 24 degrees Celsius"}]})
        self.assertEqual(status, 200, chat)
        self.assertEqual(text, chat["choices"][0]["message"]["content"] or "")
        self.assertEqual(answer.stop_reason, {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}[
            chat["choices"][0]["finish_reason"]])



class ToolRoundTripOnTheChatModel(ToolRoundTrip, unittest.TestCase):  # Qwen2.5-Coder 0.5B Instruct
    RECORD = "chat-model.txt"


class ToolRoundTripOnTheDefaultModel(ToolRoundTrip, unittest.TestCase):  # Gemma 3 270M: a second family
    RECORD = "default-model.txt"


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + UNITTEST_ARGS)
