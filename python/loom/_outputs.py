"""What generate() and stream() return, shaped as vLLM's RequestOutput / CompletionOutput."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: Optional[list[float]]  # the chosen tokens' log-probabilities, with SamplingParams(logprobs=...)
    finish_reason: Optional[str]     # "stop", "length", "cancelled", ...


@dataclass
class RequestOutput:
    request_id: str
    prompt: Optional[str]
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool
    num_cached_tokens: int = 0
    ttft_seconds: float = 0.0

    @classmethod
    def from_result(cls, index: int, prompt: Optional[str], prompt_tokens: list[int], result: dict) -> "RequestOutput":
        output = CompletionOutput(0, result["text"], list(result["token_ids"]), list(result["logprobs"]) or None,
                                  result["finish_reason"])
        return cls(str(index), prompt, list(prompt_tokens), [output], result["finish_reason"] is not None,
                   result["cached_tokens"], result["ttft_seconds"])


@dataclass
class StreamPiece:
    text: str
    token_ids: list[int]
    logprobs: Optional[list[float]]
    finish_reason: Optional[str]  # set on the last piece
    usage: dict = field(default_factory=dict)

    @classmethod
    def from_result(cls, result: dict) -> "StreamPiece":
        usage = {}
        if result["finish_reason"] is not None:
            usage = {"prompt_tokens": result["prompt_tokens"], "completion_tokens": result["completion_tokens"],
                     "cached_tokens": result["cached_tokens"]}
        return cls(result["text"], list(result["token_ids"]), list(result["logprobs"]) or None, result["finish_reason"], usage)
