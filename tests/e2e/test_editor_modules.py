"""The editor's DOM-free modules (static/editor/rules.js, document.js, layout.js) tested on their own: Chromium
opens static/editor/tests.html, whose tests run in a Web Worker (no DOM there) against data from Python, so the
graph rules are checked against their one source, nodes.registry.graph_rules()."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.workflow import spec as workflow_mod
from nodes import registry
from nodes.base import PORT_TYPES, node_id_problem, port_compatible, template_variables

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

TEMPLATES = [
    "",
    "no variables here",
    "{question}\nThink step by step.",
    "{a} {b} {a} {c}",
    "{{literal}} and {x}",
    "{{{y}}}",
    "{ spaced } {1digit} {ok_1} {dash-no}",
    "Question: {question}\nProposed answer: {candidate}",
    "{_private}{Mixed_Case9}",
    "nested {{{z}}} {w}}",
]
NODE_IDS = ["think", "vote_2", "_x", "think-2", "A9", "inputs", "outputs", "inputs2", "2nd", "a.b", "vote x", "",
            "-x", "caf\u00e9", "x\n"]


@pytest.fixture
def tests_page(chromium_browser: Any, static_url: str) -> Iterator[Any]:
    context = chromium_browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.goto(f"{static_url}/editor/tests.html")
    page.wait_for_function("typeof window.runEditorTests === 'function'")
    yield page
    context.close()
    assert errors == [], f"browser console errors: {errors}"


def _fixture() -> dict[str, Any]:
    paths = sorted((REPO / "workflows").glob("*.yaml"))
    examples = {path.stem: workflow_mod.load_workflow(path).to_dict() for path in paths}
    assert examples, "workflows/ has no examples"
    return {
        "rules": registry.graph_rules(),
        "port_table": [[s, t, port_compatible(s, t)] for s in PORT_TYPES for t in PORT_TYPES],
        "templates": [[text, template_variables(text)] for text in TEMPLATES],
        "node_ids": [[node_id, node_id_problem(node_id) is None] for node_id in NODE_IDS],
        "examples": examples,
        "schema": registry.default_registry().schema(),
    }


def _run(page: Any, fixture: dict[str, Any]) -> dict[str, dict[str, Any]]:
    results = page.evaluate("fixture => runEditorTests(fixture)", fixture)
    return {r["name"]: r for r in results}


def test_rules_document_and_layout_modules_pass_their_tests(tests_page: Any) -> None:
    results = _run(tests_page, _fixture())
    failures = {name: r.get("error") for name, r in results.items() if not r["ok"]}
    assert not failures, "\n".join(f"{name}: {error}" for name, error in failures.items())
    names = list(results)
    assert names[0] == "the modules load in a worker (no DOM)"
    for topic in ("port compatibility", "template variables", "node id rule", "round-trips",
                  "dependency order", "broken refs"):
        assert any(topic in name for name in names), f"no test about {topic}: {names}"
    assert len(names) >= 11


def test_the_module_tests_can_fail(tests_page: Any) -> None:
    """Rules that disagree with Python, or a wrong expectation, make the JS tests report failures."""
    fixture = _fixture()
    tampered = copy.deepcopy(fixture)
    tampered["rules"]["port_compatibility"]["number"] = ["number", "json"]  # number may no longer feed text
    tampered["rules"]["template_var_pattern"] = r"\{([A-Za-z_][A-Za-z0-9_]*)\}"  # {{x}} would count as x
    name = next(iter(tampered["examples"]))
    tampered["examples"][name]["outputs"]["__not_there__"] = "ghost.value"  # a ref that names nothing
    results = _run(tests_page, tampered)
    failed = {n for n, r in results.items() if not r["ok"]}
    assert "rules: port compatibility table is Python's port_compatible" in failed
    assert "rules: template variables are Python's template_variables" in failed
    assert "document: every example workflow round-trips" in failed
    assert "number -> text" in results["rules: port compatibility table is Python's port_compatible"]["error"]
    assert "layout: nodes are placed in dependency order" not in failed  # a tampered fixture fails only where it should


def test_the_harness_rules_are_graph_rules(chromium_browser: Any, static_url: str) -> None:
    """static/editor_harness.html carries a copy of graph_rules() as test data: it must not drift from Python."""
    context = chromium_browser.new_context()
    page = context.new_page()
    try:
        page.goto(f"{static_url}/editor_harness.html?empty")
        page.wait_for_function("window.ed !== undefined")
        assert page.evaluate("window.SAMPLE_RULES") == registry.graph_rules()
        # the exported helpers use the rules of the last mount
        assert page.evaluate("MetagenEditor.templateVariables('{a} {{b}} {c} {a}')") == ["a", "c"]
        assert page.evaluate("MetagenEditor.portCompatible('number', 'text')") is True
        assert page.evaluate("MetagenEditor.portCompatible('text', 'number')") is False
        message = page.evaluate("""() => {
            try { MetagenEditor.mount(document.createElement('div'), {schema: []}); return null; }
            catch (err) { return err.message; }
        }""")
        assert message == "MetagenEditor.mount: options.rules is required (nodes.registry.graph_rules())"
    finally:
        context.close()
