"""Hostile workflow texts through the real entry points: `metagen validate` / `metagen run --dry-run`, the
editor's parse (StudioService.parse_yaml) and `?wf=` links. Grammars that would crash llama.cpp are refused
at validation (`bad_grammar`); alias bombs (`yaml_aliases`) and oversized texts (`too_large`) before parsing
gets expensive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli.main import main
from app.service.studio import StudioService
from app.share.deeplink import DeepLinkError, encode_workflow, workflow_from_payload
from app.workflow import spec
from app.workflow.spec import MAX_WORKFLOW_BYTES, load_workflow_text

NESTED_5000 = "root ::= " + "(" * 5000 + '"a"' + ")" * 5000

WORKFLOW = """version: 1
name: hostile
inputs:
  question: {{type: text, default: Is water wet}}
nodes:
- id: gen
  kind: generator
  params:
    prompt: "{{question}}"
    max_tokens: 8
    {param}: {value}
  inputs: {{question: inputs.question}}
outputs: {{answer: gen.text}}
"""
PARAM_LINE = 11
"""The line of `{param}:` in WORKFLOW."""


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    previous = "a"
    for name in "bcdefghijklmnop"[:levels - 1]:
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
        previous = name
    return "\n".join(lines) + "\n"


def write(tmp_path: Path, text: str, name: str = "wf.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def service(tmp_path: Path) -> StudioService:
    return StudioService(dry_run=True, workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "none",
                         models_dir=tmp_path / "models", trace_db=tmp_path / "traces.db")


# ------------------------------------------------------------------ grammars


def test_validate_refuses_5000_nested_parentheses_with_bad_grammar(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, WORKFLOW.format(param="grammar", value=json.dumps(NESTED_5000)))
    code, _, err = cli(capsys, "validate", path)
    assert code == 2
    assert f"{path}:{PARAM_LINE}: bad_grammar: [gen] param 'grammar': line 1 of the grammar: groups are nested" in err
    assert "Traceback" not in err


def test_run_dry_run_refuses_it_too_and_the_process_goes_on(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, WORKFLOW.format(param="grammar", value=json.dumps(NESTED_5000)))
    code, out, err = cli(capsys, "run", path, "--dry-run", "--no-trace", "--json")
    assert code == 2 and "bad_grammar" in err
    assert json.loads(out)["status"] == "invalid"
    valid = write(tmp_path, WORKFLOW.format(param="grammar", value="'root ::= \"yes\" | \"no\"'"), "ok.yaml")
    code, out, err = cli(capsys, "run", valid, "--dry-run", "--no-trace", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded"


def test_a_valid_grammar_and_a_real_json_schema_still_pass(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]},
                                               "why": {"type": "string", "maxLength": 80}},
              "required": ["answer"]}
    grammar = write(tmp_path, WORKFLOW.format(param="grammar", value="'root ::= \"yes\" | \"no\"'"), "g.yaml")
    as_text = write(tmp_path, WORKFLOW.format(param="json_schema", value=json.dumps(json.dumps(schema))), "s.yaml")
    as_mapping = write(tmp_path, WORKFLOW.format(param="json_schema", value=json.dumps(schema)), "m.yaml")
    code, out, err = cli(capsys, "validate", grammar, as_text, as_mapping)
    assert code == 0, err
    assert out.count(": ok") == 3


def test_a_json_schema_that_would_make_a_huge_grammar_is_bad_grammar(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    schema = {"type": "array", "items": {"type": "string", "maxLength": 100_000}, "minItems": 10**9}
    path = write(tmp_path, WORKFLOW.format(param="json_schema", value=json.dumps(schema)))
    code, _, err = cli(capsys, "validate", path)
    assert code == 2 and f"{path}:{PARAM_LINE}: bad_grammar: [gen] param 'json_schema':" in err


# ------------------------------------------------------------------ YAML aliases and size


def test_billion_laughs_is_refused_before_any_expansion(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def must_not_run(*args: Any) -> Any:
        raise AssertionError("the aliases were walked or constructed")

    monkeypatch.setattr(spec, "_collect_lines", must_not_run)  # walks the expanded tree
    monkeypatch.setattr(spec._BoundedLoader, "construct_document", must_not_run)  # builds the data
    path = write(tmp_path, billion_laughs())
    code, _, err = cli(capsys, "validate", path)
    assert code == 2
    assert f"{path}:2: yaml_aliases: anchors and aliases" in err and "limited" in err
    assert "Traceback" not in err


def test_the_editor_parse_and_links_get_an_error_not_an_exception(tmp_path: Path) -> None:
    studio = service(tmp_path)
    for text in (billion_laughs(), billion_laughs(12), "a: &a [*a]\n"):
        result = studio.parse_yaml(text)
        assert result["error"]["code"] == "yaml_aliases", result
    with pytest.raises(DeepLinkError, match="anchors and aliases"):
        workflow_from_payload(encode_workflow(billion_laughs()))


def test_texts_over_the_limit_are_too_large_at_every_entry_point(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    big = WORKFLOW.format(param="stop", value="[]") + "#" + "x" * (2 * MAX_WORKFLOW_BYTES)
    result = service(tmp_path).parse_yaml(big)
    assert result["error"]["code"] == "too_large"
    assert f"{len(big):,} bytes" in result["error"]["message"]
    assert f"the limit is {MAX_WORKFLOW_BYTES:,} bytes" in result["error"]["message"]
    code, _, err = cli(capsys, "validate", write(tmp_path, big))
    assert code == 2 and "too_large" in err and f"{len(big):,} bytes" in err
    deep = "a: " + "[" * 5000 + "]" * 5000
    assert service(tmp_path).parse_yaml(deep)["error"]["code"] == "too_large"


def test_ordinary_yaml_with_a_harmless_alias_still_loads(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    text = WORKFLOW.format(param="stop", value='&stops ["\\n\\n", "Question:"]').replace(
        "outputs:", '- id: again\n  kind: generator\n  params: {prompt: "{question}", stop: *stops}\n'
                    "  inputs: {question: inputs.question}\noutputs:")
    wf = load_workflow_text(text)
    assert wf.nodes[0].params["stop"] == wf.nodes[1].params["stop"] == ["\n\n", "Question:"]
    assert wf.line_of("nodes", 1, "params", "stop") is not None
    code, _, err = cli(capsys, "validate", write(tmp_path, text))
    assert code == 0, err
