"""Braces inside values filled into a prompt template reach the model unchanged (JSON, code); {{ }} in the
template itself are still literal braces."""

from __future__ import annotations

from nodes.base import render_template, template_variables


def test_nested_json_and_code_values_keep_their_braces() -> None:
    assert render_template("Data: {d}", {"d": {"a": {"b": 1}}}) == 'Data: {"a": {"b": 1}}'
    code = "int main() {{ return 0; }}"
    assert render_template("Review:\n{draft}", {"draft": code}) == "Review:\n" + code
    assert render_template("{q}", {"q": "Solve {x} for {{y}}"}) == "Solve {x} for {{y}}"


def test_template_escapes_still_give_literal_braces() -> None:
    template = 'Reply as JSON like {{"answer": 1}} to: {question}'
    assert template_variables(template) == ["question"]
    assert render_template(template, {"question": "2+2?"}) == 'Reply as JSON like {"answer": 1} to: 2+2?'
    assert render_template("{{name}} is {name}", {"name": "x"}) == "{name} is x"
