"""Loom from Python: offline batched generation in the style of vLLM's ``LLM``.

    import loom
    llm = loom.LLM()  # the default model; or LLM(model="model.gguf", config="loom.toml")
    print(llm.generate(["The capital of France is"], loom.SamplingParams(max_tokens=16))[0].outputs[0].text)

Prompts go through the engine's continuous batching together; the GIL is released while the engine
works. Ctrl-C cancels what is running (its KV blocks are freed) and raises KeyboardInterrupt. Engine
errors raise :class:`LoomError` with the message the ``loom`` command prints. See docs/python.md.
"""
from __future__ import annotations

import atexit
import json
import os
import weakref
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence, Union

from . import _loom
from ._config import config_toml
from ._outputs import CompletionOutput, RequestOutput, StreamPiece

LoomError = _loom.LoomError

__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "StreamPiece", "LoomError", "default_model", "plugin_dir",
           "binary"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def default_model() -> str:
    """The default model that scripts/setup.sh installs (Gemma 3 270M), as the loom command finds it."""
    return _loom.default_model()


def plugin_dir() -> str:
    """The in-tree plugins shipped in this package."""
    return os.path.join(_PACKAGE_DIR, "lib", "loom", "plugins")


def binary() -> str:
    """The ``loom`` command shipped in this package."""
    return os.path.join(_PACKAGE_DIR, "bin", "loom")


@dataclass
class SamplingParams:
    """How to sample, named as vLLM names it. ``None`` keeps the model's (or loom.toml's) default."""
    max_tokens: int = 16
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    min_p: Optional[float] = None
    presence_penalty: Optional[float] = None
    frequency_penalty: Optional[float] = None
    repetition_penalty: Optional[float] = None
    seed: Optional[int] = None
    stop: Union[str, Sequence[str], None] = None
    ignore_eos: bool = False
    logprobs: Optional[int] = None
    json_schema: Union[dict, str, None] = None  # the output is JSON this schema accepts

    def _settings(self) -> dict:
        settings = {k: v for k, v in self.__dict__.items() if v is not None}
        if isinstance(self.stop, str):
            settings["stop"] = [self.stop]
        elif self.stop is not None:
            settings["stop"] = list(self.stop)
        if isinstance(self.json_schema, dict):
            settings["json_schema"] = json.dumps(self.json_schema)
        return settings


class LLM:
    """One model on one engine. ``config`` is a loom.toml path, its text, or a dict of its sections."""

    def __init__(self, model: Optional[str] = None, config: Union[str, dict, None] = None, *, extra_plugin_dirs: Sequence[str] = ()):
        model = default_model() if model is None else os.fspath(model)
        self._session = _loom.Session(model, config_toml(config), [plugin_dir(), *extra_plugin_dirs])
        _open_llms.add(self)

    # -- text in, text out ------------------------------------------------------------------------
    def generate(self, prompts: Union[str, Sequence[str], Sequence[Sequence[int]]],
                 sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None) -> list[RequestOutput]:
        """Every prompt (text, or token ids) at once through continuous batching; outputs in order."""
        token_prompts, texts = self._prompts(prompts)
        params = self._params(sampling_params, len(token_prompts))
        results = self._session.generate(token_prompts, [p._settings() for p in params])
        return [RequestOutput.from_result(i, text, tokens, result)
                for i, (text, tokens, result) in enumerate(zip(texts, token_prompts, results))]

    def chat(self, messages: Union[Sequence[dict], Sequence[Sequence[dict]]],
             sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None, *,
             response_format: Optional[dict] = None, chat_template_kwargs: Optional[dict] = None) -> list[RequestOutput]:
        """One conversation (a list of messages) or several, through the model's chat template.
        ``response_format`` as OpenAI's: ``{"type": "json_schema", "json_schema": {"schema": {...}}}``."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        prompts = [self.chat_prompt(c, chat_template_kwargs) for c in conversations]
        params = self._params(sampling_params, len(prompts))
        if response_format is not None:
            params = [_with_response_format(p, response_format) for p in params]
        return self.generate(prompts, params)

    def stream(self, prompt: Union[str, Sequence[int]], sampling_params: Optional[SamplingParams] = None) -> Iterator[StreamPiece]:
        """The continuation's pieces as they are generated. Closing the iterator early (``break``)
        cancels the request."""
        tokens = self.encode(prompt) if isinstance(prompt, str) else list(prompt)
        stream = self._session.stream(tokens, (sampling_params or SamplingParams())._settings())
        try:
            for piece in stream:
                yield StreamPiece.from_result(piece)
        finally:
            stream.cancel()

    # -- tokens -----------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._session.encode(text, add_special_tokens)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self._session.decode(list(token_ids))

    def get_tokenizer(self) -> "LLM":
        """vLLM's accessor: here the LLM itself, which encodes and decodes."""
        return self

    def chat_prompt(self, messages: Sequence[dict], chat_template_kwargs: Optional[dict] = None) -> list[int]:
        """The prompt tokens the chat template makes of these messages (generation prompt added)."""
        context = dict(chat_template_kwargs or {})
        context["messages"] = list(messages)
        return self._session.chat_prompt(json.dumps(context))

    # -- lifetime ---------------------------------------------------------------------------------
    @property
    def info(self) -> dict:
        return self._session.info()

    def num_unfinished(self) -> int:
        """Requests queued or running on this LLM's engine."""
        return self._session.unfinished()

    def close(self) -> None:
        """Stops the engine (requests still running are cancelled). Also at interpreter exit."""
        self._session.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------------------------
    def _prompts(self, prompts):
        if isinstance(prompts, str):
            prompts = [prompts]
        token_prompts, texts = [], []
        for p in prompts:
            if isinstance(p, str):
                token_prompts.append(self.encode(p))
                texts.append(p)
            else:
                token_prompts.append(list(p))
                texts.append(None)
        return token_prompts, texts

    @staticmethod
    def _params(sampling_params, n):
        if sampling_params is None:
            return [SamplingParams()] * n
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * n
        params = list(sampling_params)
        if len(params) != n:
            raise ValueError(f"{len(params)} SamplingParams for {n} prompts: give one, or one per prompt")
        return params


# Engines still open at interpreter exit stop first (requests cancelled, the engine thread joined),
# before Python tears down the module they live in.
_open_llms: "weakref.WeakSet[LLM]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for llm in list(_open_llms):
        llm.close()


def _with_response_format(params: SamplingParams, response_format: dict) -> SamplingParams:
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema")
        if schema is None:
            raise ValueError("response_format json_schema needs json_schema.schema")
    elif kind == "json_object":
        schema = {"type": "object"}
    else:
        raise ValueError(f"response_format type {kind!r}: use json_schema or json_object")
    return SamplingParams(**{**params.__dict__, "json_schema": schema})
