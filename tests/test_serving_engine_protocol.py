"""The engine server's request parser (servebench.protocol), property-based (hypothesis): any JSON
value in any field, and any JSON body at all, either parses or raises pydantic's ValidationError (or a
ValueError from the tokenizer's chat template or Engine.validate) — what the server answers with 400 —
never anything else; and a valid request parses to the SamplingParams OpenAI's defaults give. Runs in
process on the tiny model's tokenizer, derandomized (the same examples in CI every time).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic import ValidationError

from servebench import servers
from helpers.engine.llm import Engine
from servebench.protocol import ChatCompletionRequest, CompletionRequest, explain
from helpers.engine.request import SamplingParams

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

TEXT = st.text(st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=8)
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | TEXT,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                    max_leaves=10)
FIELDS = ["model", "prompt", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
          "stream", "stream_options", "stop", "ignore_eos", "user", "n", "logprobs", "role", "content"]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(servers.serve_folder("tiny"))


@pytest.fixture(scope="module")
def engine(tiny):
    return Engine(tiny.model)


def _base(chat: bool) -> dict:
    return ({"model": "m", "messages": [{"role": "user", "content": "Hi"}]} if chat else
            {"model": "m", "prompt": "It was"})


def _read(raw: str, chat: bool, tokenizer, engine):
    """What the server does with a body before the engine sees it; only ValidationError and ValueError
    may come out (the server answers both with 400)."""
    kind = ChatCompletionRequest if chat else CompletionRequest
    try:
        body = kind.model_validate_json(raw)
        ids, params = body.prompt_ids(tokenizer), body.params()
        engine.validate(ids, params)
        return body, params
    except ValidationError as exc:
        return explain(exc, kind), None
    except ValueError as exc:
        return str(exc), None


@PROPERTY
@given(chat=st.booleans(), field=st.sampled_from(FIELDS), value=JSON, where=st.sampled_from(["top", "message"]))
def test_any_json_in_any_field_is_parsed_or_refused_naming_it(tokenizer, engine, chat, field, value, where):
    body = _base(chat)
    if where == "message" and chat:
        body["messages"][0][field] = value
    else:
        body[field] = value
    said, params = _read(json.dumps(body), chat, tokenizer, engine)
    if params is None:
        assert isinstance(said, str) and said
        assert field in said or said.startswith("body: Invalid JSON") or "KV blocks" in said \
            or "token ids" in said or "chat template" in said, said
    else:
        assert isinstance(params, SamplingParams)


@PROPERTY
@given(chat=st.booleans(), value=JSON)
def test_any_json_body_is_parsed_or_refused(tokenizer, engine, chat, value):
    said, params = _read(json.dumps(value), chat, tokenizer, engine)     # a dict: fields missing, or unknown
    if not isinstance(value, dict):
        assert params is None and said.startswith(("body: Input should be an object", "body: Invalid JSON")), said


# a valid field as (what is sent, what SamplingParams gets), OpenAI's defaults where null or left out
ABSENT = object()


def _sent(values, default):
    return st.one_of(st.sampled_from([(ABSENT, default), (None, default)]), values.map(lambda v: (v, v)))


VALID = {"max_tokens": _sent(st.integers(1, 1_000_000), 16),
         "temperature": _sent(st.one_of(st.floats(0, 100), st.integers(0, 100)), 1.0),
         "top_p": _sent(st.floats(0, 1, exclude_min=True), 1.0),
         "seed": _sent(st.integers(0, 2 ** 63 - 1), None),
         "ignore_eos": _sent(st.booleans(), False)}


@PROPERTY
@given(chat=st.booleans(), fields=st.fixed_dictionaries(VALID), completion_tokens=_sent(st.integers(1, 50), None),
       stop=st.one_of(st.none(), st.text(min_size=1, max_size=5), st.lists(st.text(min_size=1, max_size=5), max_size=16)),
       usage=st.sampled_from([None, {}, {"include_usage": True}, {"include_usage": False, "continuous_usage_stats": True}]))
def test_a_valid_request_gets_openais_defaults(tokenizer, chat, fields, completion_tokens, stop, usage):
    body = {**_base(chat), "stop": stop, "stream_options": usage, "stream": True, "n": 1, "user": "u"}
    body.update({k: sent for k, (sent, _) in fields.items() if sent is not ABSENT})
    want = {k: got for k, (_, got) in fields.items()}
    if chat and completion_tokens[0] is not ABSENT:
        body["max_completion_tokens"] = completion_tokens[0]
        want["max_tokens"] = completion_tokens[1] or want["max_tokens"]    # max_completion_tokens wins
    req = (ChatCompletionRequest if chat else CompletionRequest).model_validate_json(json.dumps(body))
    assert req.params() == SamplingParams(**want)
    assert req.stops == ([stop] if isinstance(stop, str) else stop or [])
    assert req.prompt_ids(tokenizer)


@pytest.mark.parametrize("body, said", [
    ({"n": True}, "n: Input should be a valid integer, got True"),
    ({"n": 2}, "n: Input should be less than or equal to 1"),
    ({"stream": "false"}, "stream: Input should be a valid boolean, got 'false'"),
    ({"ignore_eos": "no"}, "ignore_eos: Input should be a valid boolean, got 'no'"),
    ({"stop": 5}, "stop: Input should be a valid string, got 5; stop: Input should be a valid array"),
    ({"stop": ["a"] * 17}, "stop: List should have at most 16 items"),
    ({"stream_options": [1]}, "stream_options: Input should be an object, got [1]"),
    ({"stream_options": {"include_usage": 1}}, "stream_options.include_usage: Input should be a valid boolean"),
    ({"temperature": 1e999}, "temperature: Input should be a finite number"),
    ({"max_tokens": 5.0}, "max_tokens: Input should be a valid integer, got 5.0"),
    ({"logprobs": 2}, "logprobs: unsupported field; this endpoint takes model, max_tokens"),
    ({"messages": [{"role": "user", "content": "a"}]}, "messages: unsupported field"),
    ({"prompt": ""}, "prompt: String should have at least 1 character"),
])
def test_each_bad_field_is_named_with_what_it_must_be(body, said):
    with pytest.raises(ValidationError) as exc:
        CompletionRequest.model_validate_json(json.dumps({"model": "m", "prompt": "a", **body}))
    assert said in explain(exc.value, CompletionRequest)


@pytest.mark.parametrize("messages, said", [
    ([{"role": "wizard", "content": "a"}], "messages.0.role: Input should be 'system', 'user' or 'assistant', got 'wizard'"),
    ([{"content": "a"}], "messages.0.role: Field required"),
    ([{"role": "user", "content": "a", "name": "x"}], "messages.0.name: unsupported field"),
    ([], "messages: List should have at least 1 item"),
])
def test_each_bad_message_is_named(messages, said):
    with pytest.raises(ValidationError) as exc:
        ChatCompletionRequest.model_validate_json(json.dumps({"model": "m", "messages": messages}))
    assert said in explain(exc.value, ChatCompletionRequest)


def test_bodies_that_are_not_json_objects(tokenizer):
    for raw, said in [("[1]", "body: Input should be an object"), ('{"model": "m", "prompt": "\\ud800"}', "body: Invalid JSON"),
                      ("[" * 100_000 + "]" * 100_000, "body: Invalid JSON: recursion limit exceeded"),
                      ("{not json", "body: Invalid JSON")]:
        with pytest.raises(ValidationError) as exc:
            CompletionRequest.model_validate_json(raw)
        assert explain(exc.value, CompletionRequest).startswith(said)
    # text parts are joined; a role the template does not take is its ValueError (400), not a 500
    parts = ChatCompletionRequest.model_validate_json(json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "H"}, {"type": "text", "text": "i"}]}]}))
    plain = ChatCompletionRequest.model_validate_json(json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}))
    assert parts.prompt_ids(tokenizer) == plain.prompt_ids(tokenizer)
    assert tokenizer.decode(plain.prompt_ids(tokenizer)) == "<s>[INST] Hi [/INST]"
    system = ChatCompletionRequest.model_validate_json(json.dumps({"model": "m", "messages": [{"role": "system", "content": "x"}]}))
    with pytest.raises(ValueError, match="messages: this chat template takes the roles user and assistant"):
        system.prompt_ids(tokenizer)
