"""OpenAI's API as the engine's server speaks it (after vLLM's entrypoints/openai/protocol.py): the
request bodies as pydantic models — OpenAI's field names and types, strict (`true` is not a number,
`"false"` is not a bool), ranges checked, any field this engine does not implement refused, never
ignored — read into token ids and SamplingParams; the answer written whole or chunk by chunk; the
output detokenised as it grows (stop strings included).
"""
from __future__ import annotations

import time
import uuid
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.engine.request import SamplingParams

Text = Annotated[str, Field(min_length=1)]
Stop = Annotated[str, Field(min_length=1, max_length=1000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StreamOptions(Strict):
    include_usage: bool | None = False           # a last chunk carrying `usage`
    continuous_usage_stats: bool | None = False  # `usage` in every chunk too (vLLM's; guidellm asks for it)


class TextPart(Strict):
    type: Literal["text"]
    text: str


class Message(Strict):
    role: Literal["system", "user", "assistant"]  # whether the model's chat template takes each is its own say
    content: str | list[TextPart]


class Sampling(Strict):
    """The fields both endpoints take. null means the default, as in OpenAI's API."""

    model: str
    max_tokens: int | None = Field(16, ge=1, le=1_000_000)
    temperature: float | None = Field(1.0, ge=0, le=100)
    top_p: float | None = Field(1.0, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=2 ** 63 - 1)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    stop: Stop | Annotated[list[Stop], Field(max_length=16)] | None = None
    ignore_eos: bool | None = False
    user: str | None = None
    n: int | None = Field(1, ge=1, le=1)         # one choice per request

    def params(self) -> SamplingParams:
        limit = getattr(self, "max_completion_tokens", None)
        limit = self.max_tokens if limit is None else limit
        return SamplingParams(max_tokens=16 if limit is None else limit,
                              temperature=1.0 if self.temperature is None else self.temperature,
                              top_p=1.0 if self.top_p is None else self.top_p,
                              ignore_eos=bool(self.ignore_eos), seed=self.seed)

    @property
    def stops(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else self.stop or []


class CompletionRequest(Sampling):
    prompt: Text | Annotated[list[int], Field(min_length=1)]    # one prompt: text or token ids

    def prompt_ids(self, tokenizer) -> list[int]:
        return list(tokenizer(self.prompt).input_ids) if isinstance(self.prompt, str) else self.prompt


class ChatCompletionRequest(Sampling):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_completion_tokens: int | None = Field(None, ge=1, le=1_000_000)   # OpenAI's newer max_tokens

    def prompt_ids(self, tokenizer) -> list[int]:
        from jinja2 import TemplateError

        msgs = [{"role": m.role, "content": m.content if isinstance(m.content, str) else
                 "".join(p.text for p in m.content)} for m in self.messages]
        try:
            text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        except TemplateError as exc:                     # the template's own raise_exception
            raise ValueError(f"messages: {exc}") from None
        return list(tokenizer(text, add_special_tokens=False).input_ids)      # the template writes <s>


def explain(exc: ValidationError, model: type[BaseModel]) -> str:
    """One line: each wrong field (dotted path), what it must be, and what was sent."""
    said = []
    for e in exc.errors()[:4]:        # a union's branches are named in loc too ('constrained-str'): not shown
        where = ".".join(str(p) for p in e["loc"] if isinstance(p, int) or p.isidentifier() and p != "str")
        if e["type"] == "extra_forbidden":
            said.append(f"{where}: unsupported field" + (f"; this endpoint takes {', '.join(model.model_fields)}"
                                                        if len(e["loc"]) == 1 else ""))
        else:
            sent = "" if not where or e["type"] == "missing" else f", got {repr(e['input'])[:40]}"
            said.append(f"{where or 'body'}: {e['msg']}{sent}")
    return "; ".join(said)


class TextStream:
    """Detokenises a request's output as it grows: the new text since last time, held back while the
    text ends inside a character (byte tokens) or at a possible start of a stop string."""

    def __init__(self, tokenizer, stop: list[str]):
        self.tokenizer, self.stop, self.sent = tokenizer, stop, ""

    def delta(self, tokens: list[int], final: bool) -> tuple[str, bool]:
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        hits = [text.find(s, max(0, len(self.sent) - len(s))) for s in self.stop]
        hits = [h for h in hits if h >= 0]
        if hits:
            text, final = text[:min(hits)], True
        elif not final:
            if text.endswith("\ufffd"):
                return "", False
            held = max((len(s) - 1 for s in self.stop), default=0)
            text = text[:len(text) - held] if held else text
        if not text.startswith(self.sent):
            return "", bool(hits)
        out, self.sent = text[len(self.sent):], text
        return out, bool(hits)


class Reply:
    """The JSON of one request's answer, whole or chunk by chunk, as OpenAI's API writes it."""

    def __init__(self, chat: bool, model: str, prompt_tokens: int):
        self.chat, self.model, self.prompt_tokens = chat, model, prompt_tokens
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        self.kind = "chat.completion" if chat else "text_completion"

    def _head(self, chunk: bool) -> dict:
        kind = self.kind + ".chunk" if chunk and self.chat else self.kind
        return {"id": self.id, "object": kind, "created": int(time.time()), "model": self.model}

    def usage(self, n: int) -> dict:
        p = self.prompt_tokens
        return {"prompt_tokens": p, "completion_tokens": n, "total_tokens": p + n}

    def choice(self, text: str, reason, chunk: bool) -> dict:
        if not self.chat:
            return {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        return {"index": 0, "delta" if chunk else "message": {"role": "assistant", "content": text},
                "finish_reason": reason}

    def chunk(self, text: str, reason, n: int | None = None) -> dict:
        """One streamed chunk; with `n` (continuous_usage_stats) the usage so far too."""
        usage = {} if n is None else {"usage": self.usage(n)}
        return {**self._head(True), "choices": [self.choice(text, reason, True)], **usage}

    def last(self, n: int) -> dict:
        return {**self._head(True), "choices": [], "usage": self.usage(n)}

    def whole(self, text: str, reason, n: int) -> dict:
        return {**self._head(False), "choices": [self.choice(text, reason, False)], "usage": self.usage(n)}
