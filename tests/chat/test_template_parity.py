#!/usr/bin/env python3
"""Chat-template parity: Loom's Jinja subset renders published chat templates exactly as Hugging Face's
apply_chat_template does (Python's jinja2 with transformers' environment: trim_blocks, lstrip_blocks,
loopcontrols, tojson(ensure_ascii=False), raise_exception, strftime_now, the {% generation %} tag).

The templates are llama.cpp's copies of the families' published ones (models/templates/*.jinja, which
scripts/setup.sh extracts to ~/.cache/loom/templates). Each is rendered for the conversations below
(system prompt, multi-turn, tools, a tool-call round trip, reasoning with thinking on and off, with and
without the generation prompt) by both engines. A conversation a template refuses (raise_exception, an
error) must be refused by both.

Every template of a family Loom runs (FAMILIES) must agree on every conversation; the others are
reported, not required. Exit 0 on success, 1 on a failure, 77 (skip) without jinja2 or templates.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

# The families of README's model table: each must render exactly.
FAMILIES = [
    "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "Qwen-QwQ-32B", "Qwen3.5-4B", "Qwen3-Coder",
    "HuggingFaceTB-SmolLM3-3B",
    "google-gemma-2-2b-it", "google-gemma-4-31B-it",
    "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "meta-llama-Llama-3.3-70B-Instruct",
    "microsoft-Phi-3.5-mini-instruct",
    "mistralai-Mistral-Nemo-Instruct-2407", "mistralai-Ministral-3-14B-Reasoning-2512",
    "Mistral-Small-3.2-24B-Instruct-2506",
    "ibm-granite-granite-3.3-2B-Instruct", "ibm-granite-granite-4.0",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
    "openai-gpt-oss-120b",  # harmony: reasoning, tools and the generation prompt
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
TOOL_CALL = {"id": "call_0001", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

CONVERSATIONS = {
    "system_user": {"messages": [{"role": "system", "content": "You are a terse assistant."},
                                 {"role": "user", "content": "Name a colour."}],
                    "add_generation_prompt": True},
    "multi_turn": {"messages": [{"role": "user", "content": "Hi!"},
                                {"role": "assistant", "content": "Hello, how can I help?"},
                                {"role": "user", "content": "Tell me a joke about élan & \"quotes\"."}],
                   "add_generation_prompt": True},
    "finished_turn": {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
                      "add_generation_prompt": False},
    "tools": {"messages": [{"role": "system", "content": "Use tools when useful."},
                           {"role": "user", "content": "Weather in Paris?"}],
              "tools": [WEATHER_TOOL], "add_generation_prompt": True},
    "tool_round_trip": {"messages": [{"role": "user", "content": "Weather in Paris?"},
                                     {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
                                     {"role": "tool", "tool_call_id": "call_0001", "name": "get_weather",
                                      "content": "{\"temp\": 18}"},
                                     {"role": "assistant", "content": "It is 18 °C in Paris."},
                                     {"role": "user", "content": "Thanks"}],
                        "tools": [WEATHER_TOOL], "add_generation_prompt": True},
    "reasoning_on": {"messages": [{"role": "user", "content": "Is 7 prime?"},
                                  {"role": "assistant", "content": "Yes.", "reasoning_content": "7 has no divisors."},
                                  {"role": "user", "content": "And 9?"}],
                     "add_generation_prompt": True, "enable_thinking": True},
    "reasoning_off": {"messages": [{"role": "user", "content": "Is 7 prime?"}],
                      "add_generation_prompt": True, "enable_thinking": False},
}


def reference_environment():
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):  # transformers' AssistantTracker, without the mask bookkeeping
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def render_reference(env, source, context):
    try:
        return True, env.from_string(source).render(**context)
    except Exception as e:  # noqa: BLE001 - any refusal counts as one
        return False, "%s: %s" % (type(e).__name__, e)


def render_loom(loom, template_path, context, tmp):
    ctx_path = os.path.join(tmp, "context.json")
    with open(ctx_path, "w", encoding="utf-8") as f:
        json.dump(context, f, ensure_ascii=False)
    p = subprocess.run([loom, "template", "--template", template_path, "--context", ctx_path],
                       capture_output=True, timeout=60)
    if p.returncode == 0:
        return True, p.stdout.decode("utf-8")
    return False, p.stderr.decode("utf-8", "replace").strip()


def first_difference(a, b):
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return "at char %d: reference %r / loom %r" % (i, a[max(0, i - 30):i + 40], b[max(0, i - 30):i + 40])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loom", required=True)
    parser.add_argument("--templates", default=os.environ.get("LOOM_TEMPLATE_DIR")
                        or os.path.expanduser("~/.cache/loom/templates"))
    parser.add_argument("--only", nargs="*", help="template names (without .jinja) to check")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    try:
        env = reference_environment()
    except ImportError:
        print("SKIP: jinja2 is not installed (scripts/setup.sh installs it)")
        return 77
    if not os.path.isdir(args.templates) or not any(n.endswith(".jinja") for n in os.listdir(args.templates)):
        print("SKIP: no chat templates in %s (scripts/setup.sh extracts them)" % args.templates)
        return 77
    names = sorted(n[:-6] for n in os.listdir(args.templates) if n.endswith(".jinja"))
    if args.only:
        names = [n for n in names if n in args.only]
    missing = [f for f in FAMILIES if f not in names and not args.only]
    failures, report = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            path = os.path.join(args.templates, name + ".jinja")
            with open(path, encoding="utf-8") as f:
                source = f.read()
            agree, both_refused, notes = 0, 0, []
            for conv_name, context in CONVERSATIONS.items():
                context = dict(context, bos_token="<BOS>", eos_token="<EOS>")
                ref_ok, ref = render_reference(env, source, context)
                loom_ok, out = render_loom(args.loom, path, context, tmp)
                if ref_ok and loom_ok and ref == out:
                    agree += 1
                elif not ref_ok and not loom_ok:
                    agree += 1  # both refuse this conversation (e.g. a template without tool support)
                    both_refused += 1
                    if conv_name == "multi_turn" and name in FAMILIES:
                        notes.append("multi_turn: refused by both, so the template cannot serve a plain chat")
                        agree -= 1
                elif ref_ok and loom_ok:
                    notes.append("%s: differs %s" % (conv_name, first_difference(ref, out)))
                elif ref_ok:
                    notes.append("%s: loom refused: %s" % (conv_name, out.splitlines()[-1] if out else "?"))
                else:
                    notes.append("%s: reference refused (%s) but loom rendered" % (conv_name, ref))
            required = name in FAMILIES
            status = "ok" if agree == len(CONVERSATIONS) else ("FAIL" if required else "differs")
            report.append("%-52s %s %d/%d%s%s" % (name, "*" if required else " ", agree, len(CONVERSATIONS),
                                                  " (%d refused by both)" % both_refused if both_refused else "",
                                                  "" if status == "ok" else "  " + status))
            if status == "FAIL":
                failures.append(name)
            if notes and (required or args.verbose):
                report.extend("      " + n for n in notes)
    print("chat template parity (conversations agreeing; * = a family Loom runs, required):")
    print("\n".join(report))
    n_ok = sum(1 for line in report if " %d/%d" % (len(CONVERSATIONS), len(CONVERSATIONS)) in line and "differs" not in line)
    print("%d of %d templates agree on all %d conversations" % (n_ok, len(names), len(CONVERSATIONS)))
    if missing:
        print("FAIL: family templates missing from %s: %s" % (args.templates, ", ".join(missing)))
        return 1
    if failures:
        print("FAIL: %s" % ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
