"""The `speculative:` option of a model entry: what validation refuses (codes and hints) and the spec it makes."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from app.workflow.model_specs import model_specs
from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from backends.base import SpeculativeSpec
from nodes.registry import default_registry

WF = """version: 1
name: spec
models:
{models}
nodes:
  - id: gen
    kind: generator
    params: {{prompt: "hi"}}
outputs:
  answer: gen.text
"""


def problems(models: str) -> list[Any]:
    wf = load_workflow_text(WF.format(models=models))
    return [i for i in validate(wf, default_registry()) if i.severity == "error"]


def test_good_options_pass_and_make_their_spec() -> None:
    text = ("  main: {source: bundled, speculative: {method: ngram, k: 6, ngram: 2, adaptive: false}}\n"
            "  big: {source: bundled, speculative: {method: draft, draft: small, k: 3}}\n"
            "  small: {source: bundled, cpu_weights: q8_0}")
    assert problems(text) == []
    specs = model_specs(load_workflow_text(WF.format(models=text)))
    assert specs["main"].speculative == SpeculativeSpec(method="ngram", k=6, ngram=2, adaptive=False)
    assert specs["big"].speculative is not None and specs["big"].speculative.draft is not None
    assert specs["big"].speculative.draft.cpu_weights == "q8_0"
    assert specs["big"].speculative.draft_alias == "small"
    assert specs["small"].speculative is None


@pytest.mark.parametrize(("models", "words"), [
    ("  main: {source: bundled, speculative: {k: 0}}", "k must be a whole number from 1 to 16"),
    ("  main: {source: bundled, speculative: {k: 17}}", "k must be"),
    ("  main: {source: bundled, speculative: {k: '4'}}", "k must be"),
    ("  main: {source: bundled, speculative: {ngram: 9}}", "ngram must be"),
    ("  main: {source: bundled, speculative: {method: medusa}}", "not one of ngram, draft"),
    ("  main: {source: bundled, speculative: {kk: 4}}", "unknown key"),
    ("  main: {source: bundled, speculative: {adaptive: 1}}", "adaptive must be"),
    ("  main: {source: bundled, speculative: {method: draft}}", "needs a draft model"),
    ("  main: {source: bundled, speculative: {method: draft, draft: main}}", "a cycle"),
    ("  main: {source: bundled, speculative: {method: draft, draft: nope}}", "not an entry"),
    ("  main: {source: bundled, speculative: {draft: x}}", "method is not 'draft'"),
    ("  main: {source: bundled, speculative: {method: draft, draft: r}}\n"
     "  r: {source: openai, base_url: 'http://127.0.0.1:1/v1', model: m}", "not a local model"),
    ("  main: {source: bundled, speculative: {method: draft, draft: d}}\n"
     "  d: {source: bundled, speculative: {k: 2}}", "itself speculative"),
    ("  main: {source: bundled, pooling: rank, speculative: {k: 2}}", "rank-pooling"),
])
def test_bad_options_are_refused_with_a_code_and_hint(models: str, words: str) -> None:
    found = [i for i in problems(models) if i.code == "bad_speculative"]
    assert found, problems(models)
    assert any(words in i.message for i in found), [i.message for i in found]
    assert all(i.hint and i.line for i in found)


def test_a_speculative_option_that_is_no_mapping_is_a_bad_model() -> None:
    found = problems("  main: {source: bundled, speculative: 4}")
    assert [i.code for i in found] == ["bad_model"]
    assert "speculative: {method: ngram" in found[0].hint


def test_a_checked_draft_option_gives_no_warning() -> None:
    """The engine decodes `method: draft` speculatively, so validation says nothing about a good one."""
    wf = load_workflow_text(WF.format(models="  big: {source: bundled, speculative: {method: draft, draft: small}}\n"
                                             "  small: {source: bundled, cpu_weights: q8_0}"))
    assert [i for i in validate(wf, default_registry()) if i.line and "speculative" in i.message] == []
    assert [i for i in validate(wf, default_registry()) if "speculative" in i.code] == []


def test_remote_entry_is_refused_with_the_servers_own_flags() -> None:
    found = problems("  main: {source: openai, base_url: 'http://127.0.0.1:1/v1', model: m, "
                     "speculative: {k: 4}}")
    [issue] = [i for i in found if i.code == "bad_speculative"]
    for flag in ("--speculative-config", "--speculative-algorithm", "--model-draft"):
        assert flag in issue.hint


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_metadata_gguf(path: Path, tokenizer_model: str) -> Path:
    """A GGUF file with no tensors and one string key: enough for the vocabulary check to read."""
    kv = _gguf_string("tokenizer.ggml.model") + struct.pack("<I", 8) + _gguf_string(tokenizer_model)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv + bytes(64))  # padding to the data alignment
    return path


def test_a_draft_with_another_vocabulary_is_refused(tmp_path: Path) -> None:
    other = write_metadata_gguf(tmp_path / "other.gguf", "llama")
    found = problems(f"  main: {{source: bundled, speculative: {{method: draft, draft: d}}}}\n"
                     f"  d: {{source: path, path: '{other}'}}")
    assert any(i.code == "bad_speculative" and "another vocabulary" in i.message for i in found)
