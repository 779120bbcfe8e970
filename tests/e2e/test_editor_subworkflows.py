"""Browser tests of sub-workflows in the editor component: Make sub-workflow from a selection (Ctrl+G, undoable),
the palette's Workflows section, ports from the child, double-click to open the child."""

from __future__ import annotations

from typing import Any

import pytest

from nodes.registry import default_registry
from tests.e2e.test_editor_component import EditorPage
from tests.e2e.test_editor_component import editor as editor  # the fixtures, re-exported
from tests.e2e.test_editor_component import editor_browser as editor_browser

pytestmark = pytest.mark.e2e

WORKFLOW_DEF = next(s for s in default_registry().schema() if s["kind"] == "workflow")

TWO_STEPS = {
    "version": 1, "name": "two-steps", "models": {"main": {"source": "bundled"}},
    "inputs": {"question": {"type": "text", "default": "What is 2+2?"}},
    "nodes": [
        {"id": "draft", "kind": "generator", "params": {"prompt": "{question}"},
         "inputs": {"question": "inputs.question"}},
        {"id": "revise", "kind": "generator", "params": {"prompt": "Improve: {text}"},
         "inputs": {"text": "draft.text"}},
    ],
    "outputs": {"answer": "revise.text"},
    "layout": {"inputs.question": [40, 120], "draft": [300, 60], "revise": [580, 120], "outputs.answer": [860, 120]},
}


def prepared(page_: EditorPage, static_url: str) -> EditorPage:
    page_.open(static_url)
    page_.page.evaluate(
        """([def_, wf]) => {
            ed.setSchema(ed.opts.schema.concat([def_]));
            window.made = [];
            window.opened = [];
            ed.opts.onMakeSubworkflow = (name, child) => { window.made.push({name, child}); return Promise.resolve(); };
            ed.opts.onOpenWorkflow = (name, nodeId) => { window.opened.push([name, nodeId]); };
            ed.load(wf, {fit: true});
        }""", [WORKFLOW_DEF, TWO_STEPS])
    return page_


def wires(page_: EditorPage) -> set[str]:
    return set(page_.page.eval_on_selector_all("[data-wire]", "els => els.map(e => e.dataset.wire)"))


def test_make_a_sub_workflow_from_a_selection_then_undo_and_redo(editor: EditorPage, static_url: str) -> None:
    ed = prepared(editor, static_url)
    page = ed.page
    page.click(ed.header("draft"))
    page.click(ed.header("revise"), modifiers=["Shift"])
    assert sorted(page.evaluate("ed.getSelection()")) == ["draft", "revise"]
    page.once("dialog", lambda dialog: dialog.accept("refine_twice"))
    page.keyboard.press("Control+g")
    page.wait_for_function("ed.getWorkflow().nodes.some(n => n.kind === 'workflow')")
    made = page.evaluate("window.made")
    assert [m["name"] for m in made] == ["refine_twice"]
    child: dict[str, Any] = made[0]["child"]
    assert child["inputs"] == {"question": {"type": "text"}}
    assert child["outputs"] == {"text": "revise.text"}
    assert {n["id"]: n.get("inputs") for n in child["nodes"]} == {
        "draft": {"question": "inputs.question"}, "revise": {"text": "draft.text"}}
    assert child["models"] == {"main": {"source": "bundled"}}
    wf = ed.workflow()
    (node,) = wf["nodes"]
    assert node["kind"] == "workflow" and node["params"] == {"workflow": "refine_twice", "models": {"main": "main"}}
    assert node["inputs"] == {"question": "inputs.question"} and wf["outputs"] == {"answer": f"{node['id']}.text"}
    assert {f"inputs.question.value->{node['id']}.question", f"{node['id']}.text->outputs.answer.value"} <= wires(ed)
    page.keyboard.press("Control+z")  # one step back: the two nodes, wired as before
    assert sorted(n["id"] for n in ed.workflow()["nodes"]) == ["draft", "revise"]
    assert ed.workflow()["outputs"] == {"answer": "revise.text"}
    page.keyboard.press("Control+Shift+z")
    assert [n["kind"] for n in ed.workflow()["nodes"]] == ["workflow"]
    palette = page.locator('.mge-palette [data-category="workflows"] [data-workflow="refine_twice"]')
    assert palette.count() == 1


def test_palette_workflows_ports_and_double_click_open(editor: EditorPage, static_url: str) -> None:
    ed = prepared(editor, static_url)
    page = ed.page
    page.evaluate("""ed.setWorkflows({critic: {inputs: [{name: "draft", type: "text", required: true},
        {name: "question", type: "text", required: false}], outputs: [{name: "answer", type: "text"}]}})""")
    page.click('.mge-palette [data-workflow="critic"]')
    node = next(n for n in ed.workflow()["nodes"] if n["kind"] == "workflow")
    assert node["id"] == "critic" and node["params"] == {"workflow": "critic"}
    assert page.locator(ed.port("critic", "in:draft")).count() == 1
    assert page.locator(ed.port("critic", "out:answer")).count() == 1
    ed.connect("critic", "answer", "outputs.answer", "value")
    assert "critic.answer->outputs.answer.value" in wires(ed)
    # the child changes: its output is renamed; the wire that no longer fits is shown as stale
    page.evaluate("""ed.setWorkflows({critic: {inputs: [{name: "draft", type: "text", required: true}],
        outputs: [{name: "text", type: "text"}]}})""")
    assert page.locator(ed.port("critic", "out:text")).count() == 1
    assert page.locator('[data-node-id="critic"] [data-port="out:answer"].mge-stale').count() == 1
    assert page.locator(ed.port("critic", "in:question")).count() == 0
    assert page.locator('[data-node-id="critic"].mge-child-changed').count() == 1
    assert any("critic changed" in m["text"] for m in ed.messages())
    page.dblclick(ed.header("critic"))
    assert page.evaluate("window.opened") == [["critic", "critic"]]


def test_mapped_node_takes_a_candidate_set(editor: EditorPage, static_url: str) -> None:
    ed = prepared(editor, static_url)
    page = ed.page
    page.evaluate("""() => {
        ed.setWorkflows({critic: {inputs: [{name: "draft", type: "text", required: true}],
                                  outputs: [{name: "answer", type: "text"}]}});
        const wf = ed.getWorkflow();
        wf.nodes.push({id: "each", kind: "workflow", map: "draft", params: {workflow: "critic"}});
        ed.load(wf);
    }""")
    assert page.evaluate("ed.getWorkflow().nodes.find(n => n.id === 'each').map") == "draft"
    assert page.locator(ed.port("each", "out:candidates")).count() == 1
    problem = page.evaluate("ed.checkConnection('draft', 'text', 'each', 'draft')")
    assert problem is not None and "candidates" in problem


def test_a_route_node_takes_its_first_branchs_ports(editor: EditorPage, static_url: str) -> None:
    ed = prepared(editor, static_url)
    page = ed.page
    route_def = next(s for s in default_registry().schema() if s["kind"] == "route")
    page.evaluate("""(def_) => {
        ed.setSchema(ed.opts.schema.concat([def_]));
        ed.setWorkflows({hard: {inputs: [{name: "question", type: "text", required: true}],
                                outputs: [{name: "answer", type: "text"}]}});
        const wf = ed.getWorkflow();
        wf.nodes.push({id: "pick", kind: "route", params: {bins: [0.5], branches: ["hard", "hard"]}});
        ed.load(wf);
    }""", route_def)
    for port in ("in:score", "in:question", "out:answer", "out:branch", "out:bin"):
        assert page.locator(ed.port("pick", port)).count() == 1, port
    assert page.locator('.mge-palette [data-category="workflows"] [data-kind="route"]').count() == 1


def test_inferred_names_can_be_changed_and_bad_ones_are_refused(editor: EditorPage, static_url: str) -> None:
    ed = prepared(editor, static_url)
    page = ed.page
    page.evaluate("ed.select(['draft', 'revise'])")
    assert page.evaluate("ed.subworkflowPorts()") == {
        "inputs": [{"name": "question", "type": "text", "required": True, "description": ""}],
        "outputs": [{"name": "text", "type": "text"}]}
    assert page.evaluate("ed.makeSubworkflow('bad', {outputs: {text: '2x'}})") is None
    assert any("cannot be a port name" in m["text"] for m in ed.messages())
    node_id = page.evaluate("ed.makeSubworkflow('steps', {inputs: {question: 'q'}, outputs: {text: 'answer'}})")
    made = page.evaluate("window.made")
    assert made[-1]["child"]["inputs"] == {"q": {"type": "text"}}
    assert made[-1]["child"]["outputs"] == {"answer": "revise.text"}
    assert made[-1]["child"]["nodes"][0]["inputs"] == {"question": "inputs.q"}
    wf = ed.workflow()
    assert wf["outputs"] == {"answer": f"{node_id}.answer"}
    assert wf["nodes"][0]["inputs"] == {"q": "inputs.question"}
