"""OpenAI's API, as the engine's server speaks it: a request body read into token ids and sampling
parameters (fields this engine does not implement are refused, never ignored), the answer written back
whole or chunk by chunk, and the output detokenised as it grows (stop strings included).
"""
from __future__ import annotations

import time
import uuid

from .request import SamplingParams

FIELDS = {"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
          "stream", "stream_options", "stop", "ignore_eos", "user", "n"}


class BadRequest(ValueError):
    """The request body asks for something invalid or unsupported (answered with 400)."""


def _number(body, name, default, low, high, whole=False):
    v = body.get(name, default)
    if v is None:
        v = default
    ok = isinstance(v, int) if whole else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok or not low <= v <= high:
        raise BadRequest(f"{name} must be a {'whole ' if whole else ''}number from {low} to {high}, got {v!r}")
    return v


def parse(body: dict, tokenizer, model_name: str, chat: bool) -> tuple[list[int], SamplingParams, dict]:
    """The prompt's token ids, the sampling parameters and the output options of one request body."""
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise BadRequest(f"unsupported field(s) {', '.join(unknown)}; "
                         f"this engine takes {', '.join(sorted(FIELDS))}")
    if body.get("model") != model_name:
        raise LookupError(f"model {body.get('model')!r} is not served here; the model is {model_name!r}")
    if body.get("n", 1) != 1:
        raise BadRequest("n must be 1 (one choice per request)")
    if chat:
        msgs = body.get("messages")
        texts = isinstance(msgs, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs)
        if not msgs or not texts:
            raise BadRequest("messages must be a non-empty list of {role, content} with text content")
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        ids = list(tokenizer(text, add_special_tokens=False).input_ids)      # the template writes <s>
    else:
        p = body.get("prompt")
        if isinstance(p, str) and p:
            ids = list(tokenizer(p).input_ids)
        elif isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            ids = p
        else:
            raise BadRequest("prompt must be a non-empty string or a list of token ids (one prompt per request)")
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else (stop or [])
    if not all(isinstance(s, str) and s for s in stop):
        raise BadRequest("stop must be null, a string or a list of non-empty strings")
    limit = body.get("max_completion_tokens") if chat else None
    limit = body.get("max_tokens") if limit is None else limit
    params = SamplingParams(max_tokens=_number({"max_tokens": limit}, "max_tokens", 16, 1, 1_000_000, whole=True),
                            temperature=float(_number(body, "temperature", 1.0, 0, 100)),
                            top_p=float(_number(body, "top_p", 1.0, 1e-9, 1)),
                            ignore_eos=bool(body.get("ignore_eos", False)),
                            seed=None if body.get("seed") is None else
                            _number(body, "seed", None, 0, 2 ** 63 - 1, whole=True))
    opts = {"stream": bool(body.get("stream", False)), "stop": stop,
            "usage": bool((body.get("stream_options") or {}).get("include_usage", False))}
    return ids, params, opts


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

    def chunk(self, text: str, reason) -> dict:
        return {**self._head(True), "choices": [self.choice(text, reason, True)]}

    def last(self, n: int) -> dict:
        return {**self._head(True), "choices": [], "usage": self.usage(n)}

    def whole(self, text: str, reason, n: int) -> dict:
        return {**self._head(False), "choices": [self.choice(text, reason, False)], "usage": self.usage(n)}
