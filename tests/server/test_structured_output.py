#!/usr/bin/env python3
"""Structured output and tool calls through `loom serve` (issue 20): response_format (json_object,
json_schema), vLLM's structured_outputs (json, regex, choice, grammar) and its older guided_* fields;
tools with tool_choice auto, none, required and a named function, streamed and not.

On a synthetic model with random weights every answer must still satisfy its grammar: the mask, not
the model, keeps it there. On the real default model (when installed) the official client's
`chat.completions.parse(response_format=PydanticModel)` returns a parsed object. Bad grammars are a 400
naming the field.

usage: test_structured_output.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
Exit code 77 (skip) without `openai`/`pydantic`, or when this build has no structured output.
"""
import json
import os
import re
import sys
import unittest


try:
    import openai
    import pydantic
except ImportError:
    print("SKIP: the `openai` and `pydantic` Python packages are needed (scripts/setup.sh installs them)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_harness  # noqa: E402
from server_harness import TMP, LoomServer, write_config  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()
MODEL = os.path.join(TMP.name, "tiny-llama.gguf")
SERVER = None

SCHEMA = {"type": "object",
          "properties": {"colour": {"type": "string", "enum": ["red", "green", "blue"]}, "ok": {"type": "boolean"},
                         "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 3}},
          "required": ["colour", "ok", "tags"], "additionalProperties": False}


def setUpModule():
    global SERVER
    server_harness.synth(MODEL, 512)
    SERVER = LoomServer(write_config("structured.toml", 'model_name = "tiny"'), MODEL)
    status, body = SERVER.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2, "guided_choice": ["a"]})
    if status == 400 and "no structured output" in body["error"]["message"]:
        SERVER.terminate()
        print("SKIP: this build has no structured output: " + body["error"]["message"])
        sys.exit(77)


def tearDownModule():
    if SERVER is not None:
        assert SERVER.terminate() == 0, SERVER.log()


def complete(extra, prompt="Answer:", max_tokens=40, **kw):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 1.0, **kw, **extra}
    status, out = SERVER.json("POST", "/v1/completions", body)
    assert status == 200, out
    return out["choices"]


class RandomModelObeysTheGrammar(unittest.TestCase):
    """Random weights, temperature 1, several seeds: only the grammar keeps the text valid."""

    def test_choice(self):
        for seed in range(6):
            for c in complete({"structured_outputs": {"choice": ["red", "green", "blue", "dark \"blue\""]}}, seed=seed):
                self.assertIn(c["text"], ["red", "green", "blue", 'dark "blue"'])
                self.assertEqual(c["finish_reason"], "stop")

    def test_regex(self):
        for seed in range(6):
            for c in complete({"guided_regex": "[0-9]{3}-[a-z]{2}"}, seed=seed):
                self.assertRegex(c["text"], r"^[0-9]{3}-[a-z]{2}$")
                self.assertEqual(c["finish_reason"], "stop")

    def test_json_schema(self):
        for seed in range(4):
            for c in complete({"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": SCHEMA}}},
                              seed=seed, max_tokens=120, n=2):
                value = json.loads(c["text"])
                self.assertEqual(list(value), ["colour", "ok", "tags"])  # the schema's order
                self.assertIn(value["colour"], ["red", "green", "blue"])
                self.assertIsInstance(value["ok"], bool)
                self.assertLessEqual(len(value["tags"]), 3)
                self.assertTrue(set(value["tags"]) <= {"a", "b"})

    def test_ebnf_grammar(self):
        grammar = 'root ::= ("yes" | "no" | "maybe") "!"?'
        for seed in range(6):
            for c in complete({"structured_outputs": {"grammar": grammar}}, seed=seed):
                self.assertRegex(c["text"], r"^(yes|no|maybe)!?$")

    def test_chat_and_streaming(self):
        client = openai.OpenAI(base_url=SERVER.base + "/v1", api_key="x", max_retries=0, timeout=60)
        out = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "pick"}], max_tokens=20,
                                             extra_body={"structured_outputs": {"choice": ["alpha", "beta"]}}, seed=3)
        self.assertIn(out.choices[0].message.content, ["alpha", "beta"])
        stream = client.completions.create(model="tiny", prompt="pick", max_tokens=20, stream=True, seed=4,
                                           extra_body={"guided_choice": ["alpha", "beta"]})
        self.assertIn("".join(chunk.choices[0].text for chunk in stream if chunk.choices), ["alpha", "beta"])

    def test_nothing_held_afterwards(self):
        complete({"guided_regex": "[a-c]{4}"}, n=3)
        self.assertEqual(SERVER.wait_kv_free()["loom_kv_blocks_used"], 0)


class SpeculationKeepsTheOutput(unittest.TestCase):
    """An n-gram drafter with a grammar: each verified row is masked after the drafts before it and the
    matcher steps back past rejected drafts, so greedy output is the same as without speculation."""

    def test_same_greedy_output_with_and_without_drafts(self):
        config = write_config("spec.toml", 'model_name = "tiny"')
        with open(config, "a") as f:
            f.write('\n[drafter]\nkind = "ngram"\nk = 4\n')
        drafting = LoomServer(config, MODEL)
        try:
            cases = [
                {"guided_regex": "(ab|cd|ef){10}"},
                {"response_format": {"type": "json_schema", "json_schema": {"schema": {
                    "type": "array", "items": {"type": "string", "enum": ["x", "yy"]}, "minItems": 8, "maxItems": 8}}}},
                {"structured_outputs": {"grammar": 'root ::= ("la " | "da ")+ "."'}},
            ]
            for i, extra in enumerate(cases):
                for prompt in ("ab ab ab ab", "la la la da la"):
                    body = {"prompt": prompt, "max_tokens": 60, "temperature": 0, **extra}
                    status_a, plain = SERVER.json("POST", "/v1/completions", body)
                    status_b, spec = drafting.json("POST", "/v1/completions", body)
                    self.assertEqual((status_a, status_b), (200, 200), (plain, spec))
                    self.assertEqual(spec["choices"][0]["text"], plain["choices"][0]["text"], (i, prompt))
            self.assertGreater(drafting.metrics()["loom_draft_tokens_proposed_total"], 0)
            self.assertEqual(drafting.wait_kv_free()["loom_kv_blocks_used"], 0)
        finally:
            self.assertEqual(drafting.terminate(), 0, drafting.log())


class BadGrammarsAreRefusedByName(unittest.TestCase):
    def refused(self, extra, field, words):
        status, out = SERVER.json("POST", "/v1/completions", {"prompt": "x", "max_tokens": 5, **extra})
        self.assertEqual(status, 400, out)
        self.assertEqual(out["error"]["param"], field)
        self.assertIn(words, out["error"]["message"])

    def test_refusals(self):
        self.refused({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}},
                     "response_format", "nonsense")
        self.refused({"response_format": {"type": "json_schema"}}, "response_format", "json_schema")
        self.refused({"response_format": {"type": "yaml"}}, "response_format", "yaml")
        self.refused({"structured_outputs": {"regex": "([a-z"}}, "structured_outputs.regex", "Unclosed")
        self.refused({"structured_outputs": {"grammar": 'root ::= "a" |'}}, "structured_outputs.grammar", "EBNF")
        self.refused({"structured_outputs": {"choice": []}}, "structured_outputs.choice", "non-empty")
        self.refused({"structured_outputs": {"choice": ["a"], "regex": "b"}}, "structured_outputs.choice", "only one")
        self.refused({"response_format": {"type": "json_object"}, "guided_choice": ["a"]}, "guided_choice", "only one")
        # The server keeps serving.
        self.assertIn(complete({"guided_choice": ["ok"]})[0]["text"], ["ok"])


# A Hermes-style template (what Qwen 2.5/3 write): tools listed in a system turn, calls as
# <tool_call>{"name", "arguments"}</tool_call>, tool results as their own turns.
HERMES_TEMPLATE = """{%- if tools %}<|im_start|>system
Tools:{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}</tool_call>{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
                                                    "unit": {"type": "string", "enum": ["C", "F"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "enum": ["CET", "UTC"]}}, "required": ["zone"],
    "additionalProperties": False}}}


class ToolCalls(unittest.TestCase):
    """tools / tool_choice on a random-weight model: forced calls always parse; auto calls are read
    from the family's format (here forced into that format by a regex, since random weights never write it)."""

    @classmethod
    def setUpClass(cls):
        config = write_config("tools.toml", 'model_name = "tiny"')
        with open(config) as f:
            text = f.read()
        text = text.replace("[server]", "[model]\nchat_template = '''" + HERMES_TEMPLATE + "'''\n\n[server]")
        with open(config, "w") as f:
            f.write(text)
        cls.server = LoomServer(config, MODEL)
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="x", max_retries=0, timeout=60)

    @classmethod
    def tearDownClass(cls):
        assert cls.server.terminate() == 0, cls.server.log()

    def ask(self, **kw):
        kw = {"max_tokens": 120, "temperature": 1.0, **kw}
        return self.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "weather?"}],
                                                   tools=[WEATHER, CLOCK], **kw)

    def test_required_always_calls_a_tool(self):
        for seed in range(4):
            # One call: with parallel calls allowed a random model may keep adding calls until max_tokens.
            out = self.ask(tool_choice="required", parallel_tool_calls=False, seed=seed)
            choice = out.choices[0]
            self.assertEqual(choice.finish_reason, "tool_calls")
            self.assertGreaterEqual(len(choice.message.tool_calls), 1)
            for call in choice.message.tool_calls:
                self.assertTrue(call.id.startswith("call_"))
                args = json.loads(call.function.arguments)
                if call.function.name == "get_weather":
                    self.assertIn(args["city"], ["Paris", "Oslo"])
                else:
                    self.assertEqual(call.function.name, "get_time")
                    self.assertIn(args["zone"], ["CET", "UTC"])

    def test_named_and_not_parallel(self):
        for seed in range(3):
            out = self.ask(tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False,
                           seed=seed)
            calls = out.choices[0].message.tool_calls
            self.assertEqual(len(calls), 1)
            self.assertEqual(calls[0].function.name, "get_time")
        # A named function is called once even with parallel calls allowed (vLLM's reading).
        for seed in range(3):
            calls = self.ask(tool_choice={"type": "function", "function": {"name": "get_time"}}, seed=seed).choices[0].message.tool_calls
            self.assertEqual([c.function.name for c in calls], ["get_time"])

    @staticmethod
    def joined_calls(deltas):
        """Tool-call deltas joined by index, as the clients do: each call's id, name, argument pieces."""
        calls = {}
        for delta in deltas:
            call = calls.setdefault(delta.index, {"id": None, "name": None, "pieces": []})
            if delta.id:  # a call's id and name come once, in its first delta
                assert call["id"] is None, "a second id for call %d" % delta.index
                call["id"], call["name"] = delta.id, delta.function.name
            if delta.function and delta.function.arguments:
                call["pieces"].append(delta.function.arguments)
        return [calls[i] for i in sorted(calls)]

    def test_streamed_calls(self):
        # Forced calls stream their arguments as they are written, and add up to the whole reply's.
        stream = self.ask(tool_choice="required", parallel_tool_calls=False, stream=True, seed=7)
        deltas, finish = [], None
        for chunk in stream:
            if not chunk.choices:
                continue
            deltas += chunk.choices[0].delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
        calls = self.joined_calls(deltas)
        self.assertTrue(calls)
        self.assertEqual(finish, "tool_calls")
        whole = self.ask(tool_choice="required", parallel_tool_calls=False, seed=7).choices[0].message.tool_calls
        self.assertEqual([(c["name"], json.loads("".join(c["pieces"]))) for c in calls],
                         [(c.function.name, json.loads(c.function.arguments)) for c in whole])

    def stream_deltas(self, regex):
        """The content pieces, tool calls (joined) and finish reason of a streamed auto-tools reply forced to `regex`."""
        # A random model may spell the text a character per token: room for every character.
        stream = self.ask(tool_choice="auto", stream=True, max_tokens=len(regex) + 16, extra_body={"guided_regex": regex})
        pieces, deltas, finish, content_after_calls = [], [], None, False
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                pieces.append(delta.content)
                content_after_calls = content_after_calls or bool(deltas)
            deltas += delta.tool_calls or []
            finish = chunk.choices[0].finish_reason or finish
        self.assertFalse(content_after_calls)
        return pieces, self.joined_calls(deltas), finish

    def test_content_streams_while_a_call_may_still_come(self):
        # Text before a call streams as it is written, and so do the call's arguments; none of its
        # marker ever shows up as content.
        text = "Let me look that up for you right now."
        call = '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC", "format": "24h"}}</tool_call>'
        pieces, calls, finish = self.stream_deltas(re.escape(text + "\n" + call))
        self.assertGreater(len(pieces), 3, pieces)
        self.assertEqual("".join(pieces), text)
        self.assertEqual([c["name"] for c in calls], ["get_time"])
        self.assertGreater(len(calls[0]["pieces"]), 3, calls[0]["pieces"])
        self.assertEqual(json.loads("".join(calls[0]["pieces"])), {"zone": "UTC", "format": "24h"})
        self.assertEqual(finish, "tool_calls")
        # A plain answer streams token by token and equals the whole reply to the byte.
        answer = "The weather in Oslo is cold < warm, see <tool notes."
        pieces, calls, finish = self.stream_deltas(re.escape(answer))
        self.assertGreater(len(pieces), 3, pieces)
        self.assertEqual("".join(pieces), answer)
        self.assertEqual((calls, finish), ([], "stop"))
        whole = self.ask(tool_choice="auto", extra_body={"guided_regex": re.escape(answer)})
        self.assertEqual(whole.choices[0].message.content, answer)

    def test_auto_reads_the_family_format_and_round_trips(self):
        call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}</tool_call>'
        out = self.ask(tool_choice="auto", extra_body={"guided_regex": re.escape(call)})
        message = out.choices[0].message
        self.assertEqual(out.choices[0].finish_reason, "tool_calls")
        self.assertEqual(message.tool_calls[0].function.name, "get_weather")
        self.assertEqual(json.loads(message.tool_calls[0].function.arguments), {"city": "Oslo", "unit": "C"})
        # The call and its result go back in; the template renders them and the model answers.
        # (A random model: it may end within the 5 tokens, so either finish is an answer; the prompt must
        # hold the call and its result beyond the first turn.)
        follow = self.client.chat.completions.create(
            model="tiny", tools=[WEATHER], max_tokens=5, seed=1, messages=[
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [message.tool_calls[0].model_dump()]},
                {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "{\"temp\": 3}"}])
        self.assertIn(follow.choices[0].finish_reason, ("length", "stop"))
        self.assertGreater(follow.usage.prompt_tokens, out.usage.prompt_tokens + 20)
        # tool_choice none: the same text stays content.
        out = self.ask(tool_choice="none", extra_body={"guided_regex": re.escape(call)})
        self.assertIsNone(out.choices[0].message.tool_calls)
        self.assertEqual(out.choices[0].message.content, call)

    def test_bad_tools_are_refused_by_name(self):
        status, out = self.server.json("POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]})
        self.assertEqual((status, out["error"]["param"]), (400, "tools[0].function.name"))
        status, out = self.server.json("POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "x"}], "tools": [WEATHER],
            "tool_choice": {"type": "function", "function": {"name": "nope"}}})
        self.assertEqual((status, out["error"]["param"]), (400, "tool_choice"))


class Reasoning(unittest.TestCase):
    """A template whose generation prompt opens <think> (DeepSeek-R1's way): the reply's reasoning
    comes back as reasoning_content, streamed and not (the text is forced by a regex)."""

    def test_reasoning_content(self):
        server = LoomServer(server_harness.write_thinking_config("think.toml", 'model_name = "tiny"'), MODEL)
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0, timeout=60)
            reply = "Two is even.</think>\n\nYes"
            kw = dict(model="tiny", messages=[{"role": "user", "content": "Is 2 even?"}], max_tokens=40,
                      extra_body={"guided_regex": re.escape(reply)})
            message = client.chat.completions.create(**kw).choices[0].message
            self.assertEqual(message.content, "Yes")
            self.assertEqual(message.model_extra["reasoning_content"], "Two is even.")
            reasoning, content = "", ""
            for chunk in client.chat.completions.create(stream=True, **kw):
                if chunk.choices:
                    delta = chunk.choices[0].delta
                    content += delta.content or ""
                    reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            self.assertEqual((reasoning, content), ("Two is even.", "Yes"))
            # chat_template_kwargs reach the template: with thinking off it closes <think> itself, so
            # the reply is all answer.
            status, out = server.json("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "x"}], "max_tokens": 10, "guided_regex": "Yes",
                "chat_template_kwargs": {"enable_thinking": False}})
            self.assertEqual(status, 200, out)
            self.assertEqual(out["choices"][0]["message"]["content"], "Yes")
            self.assertIsNone(out["choices"][0]["message"]["reasoning_content"])
            status, out = server.json("POST", "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "x"}], "max_tokens": 1, "chat_template_kwargs": [1]})
            self.assertEqual((status, out["error"]["param"]), (400, "chat_template_kwargs"))
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


def real_models():
    """(label, path) of the real models setup installed: the default Gemma 3 270M, and Qwen2.5-Coder
    0.5B Instruct (the default chat model, which scripts/setup.sh installs)."""
    found = []
    for label, record in (("gemma3", "default-model.txt"), ("qwen2", "second-model.txt")):
        path = os.path.expanduser("~/.cache/loom/" + record)
        if os.path.exists(path):
            with open(path) as f:
                model = f.read().strip()
            if os.path.exists(model):
                found.append((label, model))
            continue
        print(f"note: no {label} model recorded in {path}; its real-model cases do not run", file=sys.stderr)
    return found


class RealModelParses(unittest.TestCase):
    """The official client's parse() with Pydantic models, on each real model installed (two families:
    Gemma 3 and Qwen2.5): the twenty schemas of schema_suite.py at temperature 0 and 1, streamed and
    not; every answer validates against its schema (jsonschema) and parses into the model. Then a tool
    round trip: a forced call, its result as a tool message, and the model's answer."""

    def test_schema_suite(self):
        models = real_models()
        if not models:
            self.skipTest("no real model installed (scripts/setup.sh)")
        import jsonschema
        import schema_suite
        from openai.lib._pydantic import to_strict_json_schema

        for label, model in models:
            server = LoomServer(write_config(f"suite-{label}.toml", f'model_name = "{label}"', kv_memory="64MiB"), model)
            try:
                client = openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0, timeout=180)
                for index, (cls, prompt) in enumerate(schema_suite.SCHEMAS):
                    schema = to_strict_json_schema(cls)
                    messages = [{"role": "user", "content": prompt + " Answer in JSON."}]
                    for temperature in (0.0, 1.0):
                        with self.subTest(model=label, schema=cls.__name__, temperature=temperature, stream=False):
                            out = client.chat.completions.parse(model=label, messages=messages, response_format=cls,
                                                                max_tokens=300, temperature=temperature, seed=index)
                            choice = out.choices[0]
                            self.assertEqual(choice.finish_reason, "stop", choice.message.content)
                            self.assertIsInstance(choice.message.parsed, cls)
                            jsonschema.validate(json.loads(choice.message.content), schema)
                        with self.subTest(model=label, schema=cls.__name__, temperature=temperature, stream=True):
                            stream = client.chat.completions.create(
                                model=label, messages=messages, max_tokens=300, temperature=temperature, seed=index,
                                stream=True, response_format={"type": "json_schema", "json_schema": {
                                    "name": cls.__name__, "schema": schema, "strict": True}})
                            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
                            jsonschema.validate(json.loads(text), schema)
                            cls.model_validate_json(text)
            finally:
                self.assertEqual(server.terminate(), 0, server.log())

    def test_tool_round_trip(self):
        models = real_models()
        if not models:
            self.skipTest("no real model installed (scripts/setup.sh)")
        weather = {"type": "function", "function": {
            "name": "get_weather", "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                           "required": ["city"], "additionalProperties": False}}}
        question = [{"role": "user", "content": "What is the weather in Oslo right now?"}]
        for label, model in models:
            server = LoomServer(write_config(f"tools-{label}.toml", f'model_name = "{label}"', kv_memory="64MiB"), model)
            try:
                client = openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0, timeout=180)
                for stream in (False, True):
                    with self.subTest(model=label, stream=stream):
                        # 1. The request with tools: "required" always yields a call that parses.
                        kw = dict(model=label, messages=question, tools=[weather], tool_choice="required",
                                  parallel_tool_calls=False, max_tokens=60, temperature=0)
                        if stream:
                            calls, finish = {}, None
                            for chunk in client.chat.completions.create(stream=True, **kw):
                                if not chunk.choices:
                                    continue
                                for d in chunk.choices[0].delta.tool_calls or []:
                                    entry = calls.setdefault(d.index, {"id": d.id, "name": "", "arguments": ""})
                                    entry["name"] += d.function.name or ""
                                    entry["arguments"] += d.function.arguments or ""
                                finish = chunk.choices[0].finish_reason or finish
                            self.assertEqual(finish, "tool_calls")
                            self.assertEqual(len(calls), 1)
                            call = calls[0]
                            call_id, name, arguments = call["id"], call["name"], call["arguments"]
                        else:
                            out = client.chat.completions.create(**kw)
                            self.assertEqual(out.choices[0].finish_reason, "tool_calls")
                            self.assertEqual(len(out.choices[0].message.tool_calls), 1)
                            tc = out.choices[0].message.tool_calls[0]
                            call_id, name, arguments = tc.id, tc.function.name, tc.function.arguments
                        self.assertTrue(call_id.startswith("call_"))
                        self.assertEqual(name, "get_weather")
                        self.assertIsInstance(json.loads(arguments)["city"], str)
                        # 2. The call and its result go back; the model answers in text.
                        history = question + [
                            {"role": "assistant", "content": None, "tool_calls": [
                                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]},
                            {"role": "tool", "tool_call_id": call_id, "content": '{"city": "Oslo", "celsius": -3, "sky": "snow"}'}]
                        answer = client.chat.completions.create(model=label, messages=history, tools=[weather],
                                                                tool_choice="none", max_tokens=40, temperature=0)
                        self.assertIn(answer.choices[0].finish_reason, ("stop", "length"))
                        self.assertIsNone(answer.choices[0].message.tool_calls)
                        self.assertTrue((answer.choices[0].message.content or "").strip(), "an empty answer")
            finally:
                self.assertEqual(server.terminate(), 0, server.log())

    def test_parse_pydantic(self):
        path = os.path.expanduser("~/.cache/loom/default-model.txt")
        model = ""
        if os.path.exists(path):
            with open(path) as f:
                model = f.read().strip()
        if not os.path.exists(model):
            self.skipTest("the default model is not installed (scripts/setup.sh)")

        class Person(pydantic.BaseModel):
            name: str
            age: int
            languages: list[str]

        server = LoomServer(write_config("real.toml", 'model_name = "gemma"', kv_memory="64MiB"), model)
        try:
            client = openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0, timeout=120)
            out = client.chat.completions.parse(
                model="gemma", messages=[{"role": "user", "content": "Ada Lovelace was 36 and spoke English and French. "
                                                                     "Give her as JSON."}],
                response_format=Person, max_tokens=80, temperature=0)
            person = out.choices[0].message.parsed
            self.assertIsInstance(person, Person, out.choices[0].message.content)
            self.assertEqual(out.choices[0].finish_reason, "stop")
        finally:
            self.assertEqual(server.terminate(), 0, server.log())


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], *UNITTEST_ARGS], verbosity=2)
