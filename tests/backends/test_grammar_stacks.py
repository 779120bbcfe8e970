"""The checker's simulation of llama.cpp's parse stacks: hand-counted stacks, and the grammars whose stacks multiply
with every character (issue 24, finding 1) refused as bad_grammar, while grammars that only branch are not."""

from __future__ import annotations

import json

from app.workflow.spec import load_workflow_text
from app.workflow.validation import validate
from backends.grammar.grammar_check import _GbnfParser, _RefusedError, grammar_problem, schema_problem
from backends.grammar.grammar_stacks import _Simulation, stack_growth
from nodes.registry import default_registry
from tests.fuzz.strategies import ISSUE_24_DELAYED, ISSUE_24_GRAMMAR


def _rules(text: str) -> tuple[_Simulation, int]:
    parser = _GbnfParser(text)
    try:
        parser.parse()
    except _RefusedError:  # refused by the checks that follow the parse: the rules are built
        pass
    return _Simulation(parser.shapes.bodies, parser.shapes.terminals), parser.shapes.ids["root"]


def test_stacks_counted_by_hand() -> None:
    sim, root = _rules('root ::= "a" x\nx ::= "b" | "b" "c"')
    start = sim.start(root)
    assert len(start) == 1
    after_a = sim.step(start, ord("a"))
    assert len(after_a) == 2  # x's two alternatives both wait for "b"
    after_ab = sim.step(after_a, ord("b"))
    assert len(after_ab) == 2 and () in after_ab  # done, or waiting for "c"
    assert sim.step(after_ab, ord("c")) == {()}
    assert sim.step(after_ab, ord("z")) == set()


def test_the_issue_grammar_by_hand() -> None:
    """root ::= e: e's three letters and its empty alternative (4); after "a", e f g are pending and all can be
    empty: three letters each from e, f and g, or the end (10)."""
    sim, root = _rules(ISSUE_24_GRAMMAR)
    start = sim.start(root)
    assert len(start) == 4
    assert len(sim.step(start, ord("a"))) == 10


def test_grammars_whose_stacks_multiply_are_refused() -> None:
    problem = grammar_problem(ISSUE_24_GRAMMAR)
    assert problem is not None and problem.line == 2 and "rule 'e' is too ambiguous" in problem.message
    fibonacci = 'root ::= e\ne ::= "a" e f | ""\nf ::= "a" f e | ""'  # grows by the golden ratio
    assert "too ambiguous" in str(grammar_problem(fibonacci))
    branch = {"type": "array", "items": {"$ref": "#/definitions/t"}}
    schema = {"type": "object", "properties": {"v": {"$ref": "#/definitions/t"}}, "required": ["v"],
              "definitions": {"t": {"anyOf": [branch] * 3 + [{"type": "integer"}]}}}
    assert "too ambiguous" in str(schema_problem(json.dumps(schema)))


def test_grammars_that_only_branch_pass() -> None:
    assert grammar_problem('root ::= e\ne ::= "a" e e | ""') is None  # one more stack per character
    assert grammar_problem('root ::= [a-z]* [a-z]* [a-z]* "."') is None
    many = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(300)}}
    assert schema_problem(json.dumps(many)) is None  # ~900 ways to begin, fewer after
    nested = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object", "properties": {
        "x": {"type": "number"}, "y": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}}, "required": ["a"]}
    assert schema_problem(json.dumps(nested)) is None


def test_the_simulation_stops_at_its_window() -> None:
    """Growth behind a fixed text longer than the simulated window is left to the engine's bounds."""
    sim, root = _rules(ISSUE_24_DELAYED)
    assert stack_growth(sim.bodies, sim.terminals, root) is None


def test_validation_says_bad_grammar_on_the_generator() -> None:
    text = "\n".join([
        "version: 1", "name: ambiguous", "models:", "  main: {source: bundled}", "nodes:", "- id: gen",
        "  kind: generator", "  model: main", "  params:", "    prompt: Write letters.", "    max_tokens: 40",
        "    temperature: 1.0", f"    grammar: {json.dumps(ISSUE_24_GRAMMAR)}", "outputs: {text: gen.text}"])
    issues = validate(load_workflow_text(text), default_registry())
    assert [(i.code, i.node_id) for i in issues if i.severity == "error"] == [("bad_grammar", "gen")]
    assert "too ambiguous" in issues[0].message
