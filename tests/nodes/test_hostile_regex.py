"""User regexes run on RE2 (linear time): catastrophic patterns finish with their verdict, unsupported ones are
refused at validation with a hint, ordinary ones keep Python's meaning."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.eval.metrics import parse_metric
from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.algorithms.extract import regex_answer
from nodes.algorithms.safe_regex import HINT, compile_pattern, pattern_problem
from nodes.registry import default_registry

REGISTRY = default_registry()
HOSTILE_TEXT = "a" * 50_000 + "b"
"""With Python's re, (a+)+$ backtracks through 2^50000 ways of splitting the a's before giving up."""


def workflow(verifier_params: dict[str, Any], sampler_params: dict[str, Any] | None = None) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "hostile-regex",
        "inputs": {"question": {"type": "text", "default": "Say a"}},
        "nodes": [
            {"id": "s", "kind": "sampler", "params": {"n": 2, "prompt": "{question}", **(sampler_params or {})},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": verifier_params, "inputs": {"candidates": "s.candidates"}},
        ],
        "outputs": {"scores": "v.scores", "c": "v.candidates"},
    })


@pytest.mark.timeout(60)
def test_a_catastrophic_regex_verifier_finishes_with_its_verdict() -> None:
    wf = workflow({"method": "regex", "regex": "(a+)+$"})
    assert validate(wf, REGISTRY) == []
    scheduler = Scheduler(REGISTRY, fake_provider(replies=[HOSTILE_TEXT, "aaaa"]))
    result = scheduler.run(wf)
    assert result.status == SUCCEEDED
    assert result.outputs["scores"] == [0.0, 1.0]
    reasons = [c.meta["reasons"]["v"] for c in result.outputs["c"].candidates]
    assert reasons == ["no match for /(a+)+$/", "matches /(a+)+$/"]


@pytest.mark.timeout(60)
def test_a_catastrophic_extraction_pattern_and_metric_finish_too() -> None:
    wf = workflow({"method": "length", "length_unit": "chars"},
                  {"extract": "regex", "pattern": r"^((a+)+)$", "normalize": "none"})
    result = Scheduler(REGISTRY, fake_provider(replies=[HOSTILE_TEXT, "aaaa"])).run(wf)
    assert result.status == SUCCEEDED
    assert [c.answer for c in result.outputs["c"].candidates] == [None, "aaaa"]
    assert regex_answer(HOSTILE_TEXT + "\naaa", r"^(a+)+$") == "aaa"
    metric = parse_metric("regex:(a+)+$")
    assert not metric.grade(HOSTILE_TEXT, {}, None, {}).correct
    assert not parse_metric("regex").grade(HOSTILE_TEXT, {}, "(x+x+)+y", {}).correct


def test_a_backreference_is_refused_at_validation_with_the_hint(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "backref.yaml"
    path.write_text(r"""version: 1
name: backref
inputs:
  question: {type: text, default: Say a}
nodes:
- id: s
  kind: sampler
  params: {n: 2, prompt: "{question}"}
  inputs: {question: inputs.question}
- id: v
  kind: verifier
  params:
    method: regex
    regex: (a)\1
  inputs: {candidates: s.candidates}
outputs: {scores: v.scores}
""", encoding="utf-8")
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}:14: bad_param: [v] param 'regex':" in err
    assert "backreferences" in err and HINT in err


@pytest.mark.parametrize(("kind_params", "param"), [
    ({"method": "regex", "regex": "(?<=x)a"}, "regex"),
    ({"method": "exact", "extract": "regex", "pattern": r"(\d)\1"}, "pattern"),
    ({"method": "python", "extract": "regex", "pattern": r"(?P<d>\d)(?P=d)"}, "pattern"),
])
def test_unsupported_verifier_patterns_are_bad_params(kind_params: dict[str, Any], param: str) -> None:
    issues = [i for i in validate(workflow(kind_params), REGISTRY) if i.code == "bad_param"]
    assert len(issues) == 1 and f"param {param!r}" in issues[0].message and HINT in issues[0].message


def test_sampler_refiner_and_search_patterns_are_checked_too() -> None:
    sampler = workflow({"method": "length"}, {"extract": "regex", "pattern": "(?=a)"})
    assert any("'pattern'" in i.message and HINT in i.message for i in validate(sampler, REGISTRY))
    for kind, method_param in (("refiner", "check"), ("search", "scorer")):
        wf = workflow_from_dict({
            "version": 1, "name": kind, "inputs": {"question": {"type": "text", "default": "q"}},
            "nodes": [{"id": "k", "kind": kind, "params": {"prompt": "{question}", method_param: "regex",
                                                            "regex": r"(a)\1"},
                       "inputs": {"question": "inputs.question"}}],
            "outputs": {"out": "k.text" if kind == "refiner" else "k.candidates"},
        })
        problems = [i for i in validate(wf, REGISTRY) if i.code == "bad_param" and "'regex'" in i.message]
        assert problems and HINT in problems[0].message, kind


@pytest.mark.parametrize(("pattern", "text"), [
    (r"^\d+$", "12\n34\nx5"),
    (r"Answer:\s*(-?\d+)", "Answer: 42\nAnswer:  -7"),
    (r"\w+", "héllo wörld_1 ٣"),
    (r"[\w-]+", "a-b_é c"),
    (r"\s+", "a\u00a0b\u3000c\td"),
    (r"[^\d\s]+", "ab 12 cd"),
    (r"(?i)yes|no", "YES or No"),
    (r"\bthe\b", "the other the"),
    (r"\u00e9+|\N{GREEK SMALL LETTER ALPHA}", "éé α"),
    (r"a{,2}b", "aaab"),
    (r"x\Z", "x\nx"),
    (r"[]a]+", "]a] b"),
    (r"(?P<num>\d+)/(\d+)", "3/4 and 10/20"),
])
def test_ordinary_patterns_keep_python_s_meaning(pattern: str, text: str) -> None:
    assert pattern_problem(pattern) is None
    for multiline in (False, True):
        flags = re.MULTILINE if multiline else 0
        safe = compile_pattern(pattern, multiline=multiline)
        assert [m.group(0) for m in safe.finditer(text)] == [m.group(0) for m in re.finditer(pattern, text, flags)]
        assert safe.findall(text) == re.findall(pattern, text, flags)
        assert bool(safe.search(text)) == bool(re.search(pattern, text, flags))
    assert bool(compile_pattern(r"^\d+$").search("42\n")) == bool(re.search(r"^\d+$", "42\n"))
