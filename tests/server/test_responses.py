#!/usr/bin/env python3
"""Issue 40: OpenAI's Responses API through the official `openai` client.

On a synthetic llama: responses.create answers with a message item and usage; responses.stream's
events add up to the same text; previous_response_id continues a stored conversation (the rendered
prompt grows by the earlier turn) and an unknown one is a 404. On the two installed models,
Qwen2.5-Coder and Gemma 3 (each skipped when not installed): create and stream agree, a json_schema
text.format gives JSON the schema accepts (also through the client's parse()), and a forced function
call, its arguments streamed in pieces, is answered through previous_response_id.
Skips (77) without the `openai` package.
usage: test_responses.py --loom BUILD/bin/loom --plugins BUILD/lib/loom/plugins [unittest args]
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
    print("skipped: the openai package is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import server_harness  # noqa: E402
from server_harness import LoomServer  # noqa: E402

ARGS, UNITTEST_ARGS = server_harness.configure_from_argv()


class ResponsesOnASyntheticModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = server_harness.shared_synth()
        cls.server = LoomServer(server_harness.write_config("responses.toml"), cls.model, ["--model-name", "m"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_create_and_stream_agree(self):
        whole = self.client.responses.create(model="m", input="hello there", instructions="Be terse.", max_output_tokens=12, temperature=0)
        self.assertEqual(whole.object, "response")
        self.assertTrue(whole.output_text)
        self.assertGreater(whole.usage.output_tokens, 0)
        with self.client.responses.stream(model="m", input="hello there", instructions="Be terse.", max_output_tokens=12, temperature=0) as stream:
            kinds = [event.type for event in stream]
            final = stream.get_final_response()
        self.assertEqual(kinds[0], "response.created")
        self.assertIn("response.output_text.delta", kinds)
        self.assertEqual(final.output_text, whole.output_text)

    def test_previous_response_id_continues_the_conversation(self):
        first = self.client.responses.create(model="m", input="hello there", max_output_tokens=8, temperature=0)
        second = self.client.responses.create(model="m", input="and again", previous_response_id=first.id, max_output_tokens=8, temperature=0)
        alone = self.client.responses.create(model="m", input="and again", max_output_tokens=8, temperature=0)
        self.assertGreater(second.usage.input_tokens, alone.usage.input_tokens + first.usage.output_tokens - 1)
        with self.assertRaises(openai.NotFoundError):
            self.client.responses.create(model="m", input="x", previous_response_id="resp_nope", max_output_tokens=4)


class ReasoningItems(unittest.TestCase):
    """A thinking template (server_harness.THINKING_TEMPLATE) and a reply forced by guided_regex: the
    reasoning comes back as a reasoning item before the message, whole and streamed alike."""

    @classmethod
    def setUpClass(cls):
        cls.model = server_harness.shared_synth()
        cls.server = LoomServer(server_harness.write_thinking_config("responses-think.toml"), cls.model, ["--model-name", "m"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_reasoning_whole_and_streamed(self):
        kw = dict(model="m", input="Is 2 even?", max_output_tokens=40, reasoning={"effort": "medium"},
                  extra_body={"guided_regex": re.escape("Two is even.</think>\n\nYes")})
        whole = self.client.responses.create(**kw)
        self.assertEqual([item.type for item in whole.output], ["reasoning", "message"])
        self.assertEqual(whole.output[0].content[0].text, "Two is even.")
        self.assertEqual(whole.output_text, "Yes")
        with self.client.responses.stream(**kw) as stream:
            reasoning = "".join(event.delta for event in stream if event.type == "response.reasoning_text.delta")
            final = stream.get_final_response()
        self.assertEqual(reasoning, "Two is even.")
        self.assertEqual([item.type for item in final.output], ["reasoning", "message"])
        self.assertEqual(final.output[0].content[0].text, "Two is even.")
        self.assertEqual(final.output_text, "Yes")
        # effort "none" switches thinking off in the template: the whole reply is the answer.
        off = self.client.responses.create(model="m", input="x", max_output_tokens=5, reasoning={"effort": "none"},
                                           extra_body={"guided_regex": "Yes"})
        self.assertEqual([item.type for item in off.output], ["message"])
        self.assertEqual(off.output_text, "Yes")

    def test_a_field_of_the_wrong_type_is_a_400(self):
        status, body = self.server.json("POST", "/v1/responses", {"model": "m", "input": "x", "previous_response_id": 7})
        self.assertEqual(status, 400, body)
        self.assertIn("wrong type", body["error"]["message"])


class RealModel:
    """On an installed model (RECORD, see server_harness.installed_model): responses.create and
    responses.stream agree, and a forced function call answered through previous_response_id."""
    RECORD = None

    @classmethod
    def setUpClass(cls):
        path = server_harness.installed_model(cls.RECORD)
        if path is None:
            raise unittest.SkipTest(f"{cls.RECORD} names no installed model (scripts/setup.sh)")
        cls.server = LoomServer(server_harness.write_config("responses-" + cls.RECORD + ".toml", kv_memory="64MiB"), path,
                                ["--model-name", "real"])
        cls.client = openai.OpenAI(base_url=cls.server.base + "/v1", api_key="none", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()

    def test_create_and_stream_agree(self):
        kw = dict(model="real", input="Name three colours.", instructions="Answer briefly.", max_output_tokens=24, temperature=0)
        whole = self.client.responses.create(**kw)
        with self.client.responses.stream(**kw) as stream:
            deltas = "".join(event.delta for event in stream if event.type == "response.output_text.delta")
            final = stream.get_final_response()
        self.assertTrue(whole.output_text)
        self.assertEqual(deltas, whole.output_text)
        self.assertEqual(final.output_text, whole.output_text)
        self.assertEqual(final.usage.output_tokens, whole.usage.output_tokens)

    def test_json_schema_create_stream_and_parse(self):
        # text.format json_schema takes the grammar path: the reply is JSON the schema accepts, the same
        # whole, streamed, and read back by the client's own parse() into a typed object.
        schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                  "required": ["city", "country"], "additionalProperties": False}
        fmt = {"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}}
        kw = dict(model="real", input="Name a large city and its country, as JSON.", text=fmt, max_output_tokens=48, temperature=0)
        whole = self.client.responses.create(**kw)
        place = json.loads(whole.output_text)
        self.assertEqual(set(place), {"city", "country"}, whole.output_text)
        self.assertTrue(all(isinstance(v, str) for v in place.values()))
        with self.client.responses.stream(**kw) as stream:
            final = stream.get_final_response()
        self.assertEqual(final.output_text, whole.output_text)

        class Place(pydantic.BaseModel):
            city: str
            country: str

        parsed = self.client.responses.parse(model="real", input=kw["input"], text_format=Place, max_output_tokens=48, temperature=0)
        print(f"{self.RECORD}: json_schema: {whole.output_text!r}; parse() -> {parsed.output_parsed!r}")
        self.assertIsInstance(parsed.output_parsed, Place)

    def test_a_function_call_and_its_output(self):
        tools = [{"type": "function", "name": "get_weather", "description": "The current weather in a city",
                  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
        ask = dict(model="real", input="What is the weather in Paris?", tools=tools,
                   tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=64, temperature=0)
        first = self.client.responses.create(**ask)
        calls = [item for item in first.output if item.type == "function_call"]
        self.assertEqual(len(calls), 1, first.output)
        self.assertEqual(calls[0].name, "get_weather")
        self.assertIsInstance(json.loads(calls[0].arguments).get("city"), str)
        with self.client.responses.stream(**ask) as stream:
            pieces = [event.delta for event in stream if event.type == "response.function_call_arguments.delta"]
            final = stream.get_final_response()
        self.assertEqual([(i.name, i.arguments) for i in final.output if i.type == "function_call"],
                         [(calls[0].name, calls[0].arguments)])
        # The arguments stream as the model writes them, in several deltas that add up to the whole.
        self.assertGreater(len(pieces), 1, pieces)
        self.assertEqual("".join(pieces), calls[0].arguments)
        second = self.client.responses.create(model="real", previous_response_id=first.id, tools=tools, max_output_tokens=48, temperature=0,
                                              input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 24 C"}])
        print(f"{self.RECORD}: function round trip: {calls[0].arguments} -> {second.output_text!r}")
        self.assertTrue(second.output_text.strip() or any(i.type == "function_call" for i in second.output))
        self.assertGreater(second.usage.input_tokens, first.usage.input_tokens)


class OnTheChatModel(RealModel, unittest.TestCase):  # Qwen2.5-Coder 0.5B Instruct (Hermes-style tool calls)
    RECORD = "chat-model.txt"


class OnTheDefaultModel(RealModel, unittest.TestCase):  # Gemma 3 270M: a second family, a template without tools
    RECORD = "default-model.txt"


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + UNITTEST_ARGS)
