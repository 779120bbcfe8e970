"""`source: openai` model entries: the checks of their shape, the spec they make, and the provider's cache."""

from __future__ import annotations

from typing import Any

import pytest

from app.workflow.model_specs import model_spec_from_dict
from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from backends.base import ModelSpec
from nodes.registry import default_registry

WF = """version: 1
name: remote
models:
  main: {entry}
nodes:
  - id: gen
    kind: generator
    params: {{prompt: "hi"}}
outputs:
  answer: gen.text
"""


def problems(entry: str) -> list[Any]:
    wf = load_workflow_text(WF.format(entry=entry))
    return [i for i in validate(wf, default_registry()) if i.severity == "error"]


def test_a_good_remote_entry_passes() -> None:
    assert problems("{source: openai, base_url: 'http://127.0.0.1:8000/v1', model: m, api_key_env: MY_KEY, "
                    "max_concurrency: 4, timeout_s: 30, context_length: 8192}") == []


@pytest.mark.parametrize(("entry", "words"), [
    ("{source: openai, model: m}", "no base_url"),
    ("{source: openai, base_url: 'http://h:1/v1'}", "no model"),
    ("{source: openai, base_url: 'ftp://h/v1', model: m}", "not an http:// or https:// URL"),
    ("{source: openai, base_url: 'localhost:8000', model: m}", "not an http:// or https:// URL"),
    ("{source: openai, base_url: 'http://h:1/v1', model: m, api_key_env: 'sk-abc 123'}",
     "not an environment variable name"),
    ("{source: openai, base_url: 'http://h:1/v1', model: m, max_concurrency: 0}", "between 1 and 256"),
    ("{source: openai, base_url: 'http://h:1/v1', model: m, timeout_s: '30'}", "whole number"),
    ("{source: openai, base_url: 'http://h:1/v1', model: m, path: /x.gguf}", "a path"),
    ("{source: bundled, base_url: 'http://h:1/v1'}", "only a remote server takes"),
    ("{base_url: 'http://h:1/v1', model: m}", "add `source: openai`"),
])
def test_bad_remote_entries_say_what_is_wrong(entry: str, words: str) -> None:
    found = problems(entry)
    assert found, entry
    text = " ".join(f"{i.message} {i.hint}" for i in found)
    assert words in text, text
    assert all(i.code == "bad_model" for i in found if "base_url" in i.message or "model" in i.message)


def test_a_literal_api_key_is_refused_with_the_way_to_do_it() -> None:
    found = problems("{source: openai, base_url: 'http://h:1/v1', model: m, api_key: sk-secret-123}")
    key_issue = next(i for i in found if i.code == "bad_model")
    assert "API key" in key_issue.message and "api_key_env" in key_issue.hint
    assert "sk-secret-123" not in key_issue.message + key_issue.hint


def test_spec_from_dict_carries_the_remote_fields_and_stays_hashable() -> None:
    spec = model_spec_from_dict({"source": "openai", "base_url": "http://h:1/v1", "model": "m", "api_key_env": "K",
                                 "max_concurrency": 3, "timeout_s": 9, "context_length": 4096})
    assert (spec.source, spec.base_url, spec.model, spec.api_key_env) == ("openai", "http://h:1/v1", "m", "K")
    assert (spec.max_concurrency, spec.timeout_s, spec.context_length) == (3, 9, 4096)
    assert hash(spec) == hash(model_spec_from_dict({"source": "openai", "base_url": "http://h:1/v1", "model": "m",
                                                    "api_key_env": "K", "max_concurrency": 3, "timeout_s": 9,
                                                    "context_length": 4096}))
    assert model_spec_from_dict({"source": "bundled"}).base_url is None


def test_the_provider_keeps_one_backend_per_server_and_model(llama_provide: Any) -> None:
    provide = llama_provide
    spec = ModelSpec(source="openai", base_url="http://127.0.0.1:9/v1", model="m")
    first = provide(spec)
    assert provide(spec) is first
    assert provide(ModelSpec(source="openai", base_url="http://127.0.0.1:9/v1", model="m", device="cpu")) is first
    other = provide(ModelSpec(source="openai", base_url="http://127.0.0.1:9/v1", model="other"))
    assert other is not first
    assert first.model_id == "openai:http://127.0.0.1:9/v1#m"
    for backend in (first, other):
        backend.close()  # type: ignore[attr-defined]
